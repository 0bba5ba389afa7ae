import { max, mean, quantileSorted } from "../stats.js";
import {
  type AgentCall,
  type AgentTrace,
  callsInTimeOrder,
  ownCalls,
  ownSpawns,
  treeNodes,
} from "./agent-trace.js";
import { unknownFields } from "./weka-trace.js";

/**
 * The prefix an infinite cache keyed by block ids would hold for each call (AIPerf's theoretical prefix
 * cache): one set of seen ids per trace (`local` scope) or over the corpus (`global`), calls in recorded
 * time order; a call hits its leading ids already seen, in tokens at most its prompt.
 */
export class TheoreticalPrefixCache {
  private readonly seen = new Map<string, Set<number>>();

  /** Tokens of `call`'s prompt the infinite cache holds, then records its ids as seen. */
  lookup(scopeKey: string, call: AgentCall, blockSize: number): number {
    let seen = this.seen.get(scopeKey);
    if (!seen) {
      seen = new Set();
      this.seen.set(scopeKey, seen);
    }
    let leading = 0;
    while (leading < call.hashIds.length && seen.has(call.hashIds[leading] as number)) leading++;
    for (const id of call.hashIds) seen.add(id);
    return Math.min(call.input, leading * blockSize);
  }

  /** A scope no call will look up again (a drained replay of a `local` trace): its ids go. */
  forget(scopeKey: string): void {
    this.seen.delete(scopeKey);
  }
}

/** The key of a trace's id namespace: its own for `local`, the corpus's for `global`. */
export function scopeKeyOf(trace: AgentTrace, instance = ""): string {
  return trace.hashScope === "global" ? `global${instance}` : `${trace.id}${instance}`;
}

interface Spread {
  total: number;
  mean: number;
  median: number;
  max: number;
}

export interface AgentTraceStats {
  sessions: number;
  /** sessions with at least one subagent */
  sessionsWithSubagents: number;
  /** model calls of the sessions themselves (their turns), per session */
  turnsPerSession: Spread;
  subagents: {
    total: number;
    background: number;
    withoutCalls: number;
    nested: number;
    callsInSubagents: number;
  };
  calls: number;
  inputTokensPerCall: Spread;
  outputTokensPerCall: Spread;
  /** the largest prompt + output of any call of a session (its subagents' included) */
  peakContextPerSession: Spread;
  /** ids over every call, and the share of prompt tokens an infinite cache keyed by them would hold */
  blockIds: number;
  theoreticalPrefixHit: number;
  /** calls whose ids cover fewer tokens than their prompt (the rest counts as unshared) */
  callsWithShortHashIds: number;
  /** per block size found */
  blockSizes: number[];
  /** fields the reader does not know (kept on export), with how often each occurs */
  unknownFields: Record<string, number>;
}

function spread(xs: readonly number[]): Spread {
  const sorted = [...xs].sort((a, b) => a - b);
  return {
    total: xs.reduce((a, b) => a + b, 0),
    mean: mean(xs),
    median: quantileSorted(sorted, 0.5),
    max: max(xs),
  };
}

export function agentTraceStats(traces: readonly AgentTrace[]): AgentTraceStats {
  const cache = new TheoreticalPrefixCache();
  let inputTokens = 0;
  let hitTokens = 0;
  const inputs: number[] = [];
  const outputs: number[] = [];
  const peaks: number[] = [];
  const turns: number[] = [];
  const unknown: Record<string, number> = {};
  const subagents = { total: 0, background: 0, withoutCalls: 0, nested: 0, callsInSubagents: 0 };
  let sessionsWithSubagents = 0;
  let blockIds = 0;
  let shortIds = 0;
  for (const trace of traces) {
    const nodes = treeNodes(trace.root);
    turns.push(ownCalls(trace.root).length);
    if (nodes.length > 1) sessionsWithSubagents++;
    for (const node of nodes) {
      for (const spawn of ownSpawns(node)) {
        subagents.total++;
        if (node !== trace.root) subagents.nested++;
        if (spawn.background) subagents.background++;
        if (ownCalls(spawn.agent).length === 0) subagents.withoutCalls++;
        subagents.callsInSubagents += ownCalls(spawn.agent).length;
      }
    }
    let peak = 0;
    for (const { call } of callsInTimeOrder(trace.root)) {
      inputs.push(call.input);
      outputs.push(call.output);
      peak = Math.max(peak, call.input + call.output);
      blockIds += call.hashIds.length;
      if (call.hashIds.length * trace.blockSize < call.input) shortIds++;
      inputTokens += call.input;
      hitTokens += cache.lookup(scopeKeyOf(trace), call, trace.blockSize);
    }
    peaks.push(peak);
    for (const [field, n] of unknownFields(trace)) unknown[field] = (unknown[field] ?? 0) + n;
  }
  return {
    sessions: traces.length,
    sessionsWithSubagents,
    turnsPerSession: spread(turns),
    subagents,
    calls: inputs.length,
    inputTokensPerCall: spread(inputs),
    outputTokensPerCall: spread(outputs),
    peakContextPerSession: spread(peaks),
    blockIds,
    theoreticalPrefixHit: inputTokens === 0 ? 0 : hitTokens / inputTokens,
    callsWithShortHashIds: shortIds,
    blockSizes: [...new Set(traces.map((t) => t.blockSize))].sort((a, b) => a - b),
    unknownFields: unknown,
  };
}
