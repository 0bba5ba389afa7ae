import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { NO_HINTS } from "../../core/client-hints.js";
import type { KvChanges } from "../../core/step-plan.js";
import { ReplyTap } from "../reply-tap.js";
import type { GatewayTurn } from "../turn.js";
import { SlotRetention } from "./slot-retention.js";

function turnOf(programId: string): GatewayTurn {
  return {
    requestId: `${programId}-${Math.random()}`,
    programId,
    isLastStep: false,
    toolHint: null,
    retentionHints: NO_HINTS,
    priorTurns: null,
    cacheSalt: null,
    promptText: "",
    maxOutputTokens: null,
    request: { api: "chat", body: {}, stream: false, streamUsage: false },
  };
}

const tap = () => new ReplyTap("chat", { onTokens: () => {}, onEnd: () => {} });

function pinned(programId: string): KvChanges {
  return { pinned: [{ requestId: "r", programId, tokens: 100, expiresS: 10 }], released: [], ops: [] };
}

/** A port nothing listens on: a slot save sent there fails as a backend that is gone would. */
async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

describe("llama-server retention: slots", () => {
  it("a program's turns go to its slot; new programs take empty slots, then unpinned ones; a pinned slot goes last; with every slot running a turn waits for one", async () => {
    const slots = new SlotRetention(`http://127.0.0.1:${await closedPort()}`, 3, () => {});
    const run = async (program: string) => {
      const turn = turnOf(program);
      const fields = await slots.prepare(turn, turn.requestId);
      return { slot: fields["id_slot"], end: () => slots.ended(turn, turn.requestId, tap(), true) };
    };
    const a = await run("A");
    const b = await run("B");
    const c = await run("C");
    assert.deepEqual([a.slot, b.slot, c.slot], [0, 1, 2], "empty slots first");
    a.end();
    b.end();
    c.end();
    slots.applyKvChanges(pinned("A"));
    slots.applyKvChanges(pinned("C"));
    const again = await run("A");
    assert.equal(again.slot, 0, "a returning turn goes to its program's slot");
    assert.equal(slots.stats.slotHits, 1);
    const d = await run("D");
    assert.equal(d.slot, 1, "a new program takes the slot nobody pinned (B's)");
    const e = await run("E");
    assert.equal(e.slot, 2, "every other slot busy: C's pinned slot is given away");
    assert.equal(slots.stats.pinsDisplaced, 1);
    assert.equal(slots.stats.slotSaves, 0);
    assert.equal(slots.stats.slotSaveFailures, 1, "its save was tried, and failed: the backend is gone");
    const f = run("F");
    let placed = false;
    void f.then(() => {
      placed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(placed, false, "all three slots run: F waits, it is not sent for llama-server to place");
    d.end();
    assert.equal((await f).slot, 1, "the slot that stopped running is F's");
  });
});
