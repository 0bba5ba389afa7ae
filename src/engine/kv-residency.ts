/**
 * Where each program's KV is in the engine now, read off the runner's sequence slots and the tier store:
 * the pool (held by a running turn, by a pin, or by nobody and still reusable) and the RAM or disk tier.
 */
import type { ProgramKv } from "./engine-api.js";
import type { KvSlot } from "./kv-slots.js";
import type { TierEntry } from "./kv-tier-store.js";

const HOLDER_RANK = { running: 0, pinned: 1, reusable: 2 } as const;

function holderOf(slot: KvSlot): { programId: string; holder: keyof typeof HOLDER_RANK } | null {
  if (slot.owner !== null) return { programId: slot.owner.programId, holder: "running" };
  if (slot.pinnedFor !== null) return { programId: slot.pinnedFor, holder: "pinned" };
  if (slot.length > 0 && slot.programId !== "") return { programId: slot.programId, holder: "reusable" };
  return null;
}

/**
 * Per program, its strongest-held pool sequence (running before pinned before reusable; the longest among
 * equals) and its longest saved state in a tier (an entry the store keeps for that program).
 */
export function kvByProgram(slots: readonly KvSlot[], saved: readonly TierEntry[]): Map<string, ProgramKv> {
  const out = new Map<string, ProgramKv>();
  const entryOf = (programId: string): ProgramKv =>
    out.get(programId) ?? { poolTokens: 0, poolHolder: null, tier: null, tierTokens: 0, tierBytes: 0 };
  for (const slot of slots) {
    const held = holderOf(slot);
    if (held === null) continue;
    const kv = entryOf(held.programId);
    const stronger =
      kv.poolHolder === null ||
      HOLDER_RANK[held.holder] < HOLDER_RANK[kv.poolHolder] ||
      (held.holder === kv.poolHolder && slot.length > kv.poolTokens);
    if (stronger) out.set(held.programId, { ...kv, poolTokens: slot.length, poolHolder: held.holder });
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
