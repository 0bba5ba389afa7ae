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

  it("on a backend of one slot, the next turn is sent ahead without a slot for llama-server to queue, one at a time, in arrival order", async () => {
    const slots = new SlotRetention(`http://127.0.0.1:${await closedPort()}`, 1, () => {});
    const sent: string[] = [];
    const start = (program: string) => {
      const turn = turnOf(program);
      const fields = slots.prepare(turn, turn.requestId).then((f) => {
        sent.push(program);
        return f;
      });
      return { fields, end: () => slots.ended(turn, turn.requestId, tap(), true) };
    };
    const settle = () => new Promise((resolve) => setTimeout(resolve, 10));
    const a = start("A");
    assert.deepEqual(await a.fields, { id_slot: 0, cache_prompt: true }, "an idle slot: sent with its id");
    const b = start("B");
    assert.deepEqual(
      await b.fields,
      { cache_prompt: true },
      "the slot runs: B is sent ahead, without a slot",
    );
    const c = start("C");
    await settle();
    assert.deepEqual(sent, ["A", "B"], "one turn ahead at a time: C waits");
    a.end();
    assert.deepEqual(await c.fields, { cache_prompt: true }, "B took the slot as A ended: C goes ahead next");
    const d = start("D");
    await settle();
    assert.deepEqual(sent, ["A", "B", "C"], "D waits behind C");
    b.end();
    assert.deepEqual(await d.fields, { cache_prompt: true }, "C took the slot as B ended: D goes ahead next");
    c.end();
    d.end();
    const returning = start("D");
    assert.deepEqual(
      await returning.fields,
      { id_slot: 0, cache_prompt: true },
      "the slot idle: sent with its id",
    );
    assert.equal(slots.stats.slotHits, 1, "D's next turn found D's KV in the slot");
  });
});
