/**
 * When a gateway touches a pinned program's prefix on an engine that has no pins (vLLM, SGLang): the engine
 * reuses freed blocks in LRU order, so a prefix freed when the engine had allocated A tokens of KV is reached
 * once it has allocated about as much again as it holds beside its running requests. The gateway sends a
 * keep-alive (the program's latest turn again, one output token: a hit that makes the prefix most recently
 * used) once the engine allocated this share of that room since the prefix was last touched. The gateway
 * (src/gateway/retention/keep-alive.ts) and its simulation (src/sim/gateway-sim.ts) follow the same rule.
 */
export const KEEP_ALIVE_SHARE = 0.5;

/**
 * A keep-alive is due: `allocatedSinceTouch` KV tokens allocated since the prefix of `prefixTokens` was last
 * touched, `idleTokens` held beside the running requests. None while that room cannot hold the prefix: the
 * engine is already reusing every free block, and touching it again would only take blocks from running turns.
 */
export function keepAliveDue(allocatedSinceTouch: number, idleTokens: number, prefixTokens: number): boolean {
  return idleTokens >= prefixTokens && allocatedSinceTouch >= KEEP_ALIVE_SHARE * idleTokens;
}
