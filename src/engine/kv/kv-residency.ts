/**
 * Where each program's KV is in the engine now, read off the scheduler's sequences and tier entries: the
 * pool (held by a running turn, by a pin, or by nobody and still reusable) and the RAM or disk tier.
 */
import type { Sequence } from "../../core/kv/sequences/sequence.js";
import type { TierEntry } from "../../core/kv/sequences/sequence-tiers.js";
import type { ProgramKv } from "../engine-api.js";

const HOLDER_RANK = { running: 0, pinned: 1, reusable: 2 } as const;

function holderOf(seq: Sequence): { programId: string; holder: keyof typeof HOLDER_RANK } | null {
  const request = seq.running;
  if (request !== null) return { programId: request.programId, holder: "running" };
  const pin = seq.pin;
  if (pin !== null) return { programId: pin.programId, holder: "pinned" };
  if (seq.length > 0 && seq.programId !== "") return { programId: seq.programId, holder: "reusable" };
  return null;
}

/**
 * Per program, its strongest-held pool sequence (running before pinned before reusable; the longest among
 * equals) and its longest saved state in a tier (an entry kept for that program).
 */
export function kvByProgram(seqs: readonly Sequence[], saved: readonly TierEntry[]): Map<string, ProgramKv> {
  const out = new Map<string, ProgramKv>();
  const entryOf = (programId: string): ProgramKv =>
    out.get(programId) ?? { poolTokens: 0, poolHolder: null, tier: null, tierTokens: 0, tierBytes: 0 };
  for (const seq of seqs) {
    const held = holderOf(seq);
    if (held === null) continue;
    const kv = entryOf(held.programId);
    const stronger =
      kv.poolHolder === null ||
      HOLDER_RANK[held.holder] < HOLDER_RANK[kv.poolHolder] ||
      (held.holder === kv.poolHolder && seq.length > kv.poolTokens);
    if (stronger) out.set(held.programId, { ...kv, poolTokens: seq.length, poolHolder: held.holder });
  }
  for (const entry of saved) {
    if (entry.owner === null) continue;
    const kv = entryOf(entry.owner);
    if (entry.length > kv.tierTokens) {
      out.set(entry.owner, { ...kv, tier: entry.tier, tierTokens: entry.length, tierBytes: entry.bytes });
    }
  }
  return out;
}
