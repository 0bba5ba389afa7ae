import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Request } from "../core/request.js";
import { kvByProgram } from "./kv-residency.js";
import { KvSlot } from "./kv-slots.js";
import type { TierEntry } from "./kv-tier-store.js";

function slot(
  seqId: number,
  programId: string,
  length: number,
  how: "running" | "pinned" | "cached",
): KvSlot {
  const s = new KvSlot(seqId);
  s.programId = programId;
  for (let i = 0; i < length; i++) s.cells.push(i);
  if (how === "running") s.owner = { programId } as Request;
  if (how === "pinned") s.pinnedFor = programId;
  return s;
}

function saved(owner: string | null, length: number, tier: "cpu" | "disk", bytes: number): TierEntry {
  return { owner, length, tier, bytes } as TierEntry;
}

describe("where each program's KV is", () => {
  it("names the strongest holder in the pool and the longest state in a tier, per program", () => {
    const kv = kvByProgram(
      [
        slot(0, "a", 300, "cached"),
        slot(1, "a", 200, "running"),
        slot(2, "b", 500, "pinned"),
        slot(3, "c", 100, "cached"),
        slot(4, "c", 150, "cached"),
        new KvSlot(5),
      ],
      [
        saved("a", 280, "cpu", 4096),
        saved("d", 700, "cpu", 9000),
        saved("d", 900, "disk", 12000),
        saved(null, 64, "cpu", 1),
      ],
    );
    assert.deepEqual(kv.get("a"), {
      poolTokens: 200,
      poolHolder: "running",
      tier: "cpu",
      tierTokens: 280,
      tierBytes: 4096,
    });
    assert.deepEqual(kv.get("b"), {
      poolTokens: 500,
      poolHolder: "pinned",
      tier: null,
      tierTokens: 0,
      tierBytes: 0,
    });
    assert.deepEqual(kv.get("c"), {
      poolTokens: 150,
      poolHolder: "reusable",
      tier: null,
      tierTokens: 0,
      tierBytes: 0,
    });
    assert.deepEqual(kv.get("d"), {
      poolTokens: 0,
      poolHolder: null,
      tier: "disk",
      tierTokens: 900,
      tierBytes: 12000,
    });
    assert.deepEqual(
      [...kv.keys()].sort(),
      ["a", "b", "c", "d"],
      "empty slots and ownerless states belong to nobody",
    );
  });
});
