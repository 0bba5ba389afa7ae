import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Sequence } from "../../core/kv/sequences/sequence.js";
import type { TierEntry } from "../../core/kv/sequences/sequence-tiers.js";
import type { Pin } from "../../core/program.js";
import type { Request } from "../../core/request.js";
import { kvByProgram } from "./kv-residency.js";

function slot(
  seqId: number,
  programId: string,
  length: number,
  how: "running" | "pinned" | "cached",
): Sequence {
  const s = new Sequence(seqId);
  s.programId = programId;
  const blocks = Array.from({ length: Math.ceil(length / 16) }, (_, i) => i);
  if (how === "running")
    s.holder = { kind: "request", request: { programId, numComputedTokens: length } as Request };
  else if (how === "pinned")
    s.holder = { kind: "pin", pin: { programId, tokens: length, blockIds: blocks } as unknown as Pin };
  else s.letGo(length, blocks);
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
        new Sequence(5),
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
      "empty sequences and ownerless states belong to nobody",
    );
  });
});
