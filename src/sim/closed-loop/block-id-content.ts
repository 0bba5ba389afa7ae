import { extendHash, saltedRootHash } from "../../core/kv/prefix-hash.js";
import { BlockHashContent } from "../../core/kv/token-content.js";

const TWO_32 = 0x100000000;

/** Folds a block id (any integer up to 2^53) into a hash chain. */
function foldId(hash: number, id: number): number {
  return extendHash(extendHash(hash, id % TWO_32), Math.floor(id / TWO_32));
}

/**
 * The KV content of one traced call, from its block ids, at the scheduler's block size: the scheduler's
 * block k, whose tokens end at (k+1) x blockSizeTokens, hashes the chain of every trace block id its
 * tokens reach, so two calls' blocks are equal exactly when the ids up to there are (whatever the two
 * block sizes). Blocks past the ids, and every block holding generated tokens, are this call's own:
 * a replay sends the recorded history, never the server's output, so generated KV is never reused.
 * `scopeKey` salts the chain (a replay's cache-bust marker); `uniqueTag` makes the call's own blocks
 * unlike any other call's.
 */
export function blockIdContent(
  hashIds: readonly number[],
  traceBlockSize: number,
  promptTokens: number,
  outputTokens: number,
  blockSizeTokens: number,
  scopeKey: string,
  uniqueTag: number,
): BlockHashContent {
  const numBlocks = Math.floor((promptTokens + outputTokens) / blockSizeTokens);
  const promptBlocks = Math.floor(promptTokens / blockSizeTokens);
  const hashes = new Float64Array(numBlocks);
  let hash = saltedRootHash(scopeKey);
  let folded = 0;
  let k = 0;
  for (; k < promptBlocks; k++) {
    const endToken = (k + 1) * blockSizeTokens;
    const lastTraceBlock = Math.floor((endToken - 1) / traceBlockSize);
    if (lastTraceBlock >= hashIds.length) break;
    for (; folded <= lastTraceBlock; folded++) hash = foldId(hash, hashIds[folded] as number);
    hash = extendHash(hash, endToken % traceBlockSize);
    hashes[k] = hash || 1;
  }
  hash = foldId(extendHash(hash, 0x6f776e), uniqueTag);
  for (; k < numBlocks; k++) {
    hash = extendHash(hash, k);
    hashes[k] = hash || 1;
  }
  return new BlockHashContent(hashes);
}
