import { Rng } from "../core/rng.js";
import { matchMeanStd } from "./moment-match.js";
import type { TraceProgram, TraceTurn } from "./trace.js";

export type WorkloadKind = "swe-bench" | "bfcl";

interface MeanStd {
  mean: number;
  std: number;
}

export interface WorkloadProfile {
  /** turns (model calls) per program; normal, rounded, at least 1 */
  turns: MeanStd;
  /** per tool call; lognormal */
  toolS: MeanStd;
  /** the context a program ends with: last prompt + last output; lognormal */
  finalContextTokens: MeanStd;
  /** system prompt + task of the first call; lognormal */
  firstPromptTokens: MeanStd;
  /** per model call; lognormal */
  outputTokens: MeanStd;
  /** tool name -> relative frequency */
  tools: Readonly<Record<string, number>>;
}

/**
 * Turns, tool times and final contexts are the CacheTTL paper's published statistics of its GPT-5
 * traces. First prompts, outputs and tool mixes are not published; the values here are assumptions.
 */
export const WORKLOAD_PROFILES: Readonly<Record<WorkloadKind, WorkloadProfile>> = {
  "swe-bench": {
    turns: { mean: 10.9, std: 2.1 },
    toolS: { mean: 0.925, std: 3.55 },
    finalContextTokens: { mean: 70_126, std: 19_732 },
    firstPromptTokens: { mean: 3000, std: 800 },
    outputTokens: { mean: 300, std: 200 },
    tools: {
      str_replace_editor: 40,
      python: 20,
      grep: 12,
      find: 8,
      cat: 8,
      ls: 6,
      git: 3,
      pytest: 3,
    },
  },
  // BFCL v4 web search: the model searches and reads pages with these two functions.
  bfcl: {
    turns: { mean: 6.3, std: 2.3 },
    toolS: { mean: 1.923, std: 2.133 },
    finalContextTokens: { mean: 93_256, std: 68_687 },
    firstPromptTokens: { mean: 2500, std: 700 },
    outputTokens: { mean: 150, std: 100 },
    tools: { duckduckgo_search: 55, fetch_url_content: 45 },
  },
};

function sampleTurnCount(rng: Rng, { mean, std }: MeanStd): number {
  for (;;) {
    const n = Math.round(rng.normal(mean, std));
    if (n >= 1) return n;
  }
}

function weightedPick(rng: Rng, weights: Readonly<Record<string, number>>): string {
  const entries = Object.entries(weights);
  const total = entries.reduce((sum, [, w]) => sum + w, 0);
  let u = rng.next() * total;
  for (const [name, w] of entries) {
    u -= w;
    if (u < 0) return name;
  }
  return entries.at(-1)![0];
}

/** total split into parts.length integers ≥ 1 in proportion to weights (total ≥ parts). */
function splitTokens(total: number, weights: readonly number[]): number[] {
  const spare = total - weights.length;
  const weightSum = weights.reduce((a, b) => a + b, 0);
  let cumulative = 0;
  let given = 0;
  return weights.map((w) => {
    cumulative += w;
    const upTo = Math.round((spare * cumulative) / weightSum);
    const part = 1 + upTo - given;
    given = upTo;
    return part;
  });
}

/** Prompt, output and observation sizes of one program, summing exactly to its final context. */
function programTokens(rng: Rng, profile: WorkloadProfile, turnCount: number, drawnContext: number) {
  const lognormalInt = ({ mean, std }: MeanStd) => Math.max(1, Math.round(rng.lognormal(mean, std)));
  // Every turn needs at least one output token and every observation one token.
  const finalContext = Math.max(2 * turnCount, Math.round(drawnContext));
  let outputs = Array.from({ length: turnCount }, () => lognormalInt(profile.outputTokens));
  let firstPrompt = lognormalInt(profile.firstPromptTokens);
  const observationCount = turnCount - 1;
  const fixed = firstPrompt + outputs.reduce((a, b) => a + b, 0);
  if (observationCount === 0 || fixed > finalContext - observationCount) {
    // A short program: shrink prompt and outputs to leave one token per observation.
    const shrink = Math.min(1, (finalContext - observationCount) / fixed);
    outputs = outputs.map((o) => Math.max(1, Math.floor(o * shrink)));
    firstPrompt = finalContext - observationCount - outputs.reduce((a, b) => a + b, 0);
  }
  const weights = Array.from({ length: observationCount }, () => rng.lognormal(1, 1));
  const observationTotal = finalContext - firstPrompt - outputs.reduce((a, b) => a + b, 0);
  return { firstPrompt, outputs, observations: splitTokens(observationTotal, weights) };
}

export interface GenerateOptions {
  kind: WorkloadKind;
  programs: number;
  seed: number;
  /** no program's final context exceeds this (the serving model's context window); default: no cap */
  maxContextTokens?: number | undefined;
}

/**
 * Synthetic programs with a workload's published statistics. Each call's prompt is the previous
 * prompt + output + the tool's observation, and all of the previous prompt + output is reusable.
 * Tool times and final contexts are drawn lognormal and then matched to the published mean and std
 * over the whole workload: with a tail as heavy as SWE-bench's tool times (std 3.8× the mean), the std
 * of even 20,000 draws misses by ±20%. With a context cap, programs drawn longer end at the cap, so a
 * heavy-tailed workload (BFCL: mean 93k, std 69k tokens) comes out shorter than published under a 128k model.
 */
export function generateWorkload({
  kind,
  programs,
  seed,
  maxContextTokens,
}: GenerateOptions): TraceProgram[] {
  const profile = WORKLOAD_PROFILES[kind];
  const rng = new Rng(seed);
  const shapeRng = rng.fork();
  const toolRng = rng.fork();

  const turnCounts = Array.from({ length: programs }, () => sampleTurnCount(shapeRng, profile.turns));
  const { mean, std } = profile.finalContextTokens;
  const cap = maxContextTokens ?? Number.POSITIVE_INFINITY;
  const contexts = matchMeanStd(
    turnCounts.map(() => shapeRng.lognormal(mean, std)),
    mean,
    std,
  ).map((tokens) => Math.min(tokens, cap));
  const drafts = turnCounts.map((turnCount, i) => ({
    turnCount,
    ...programTokens(shapeRng, profile, turnCount, contexts[i]!),
  }));
  const toolCalls = drafts.reduce((sum, d) => sum + d.turnCount - 1, 0);
  const drawnS = Array.from({ length: toolCalls }, () =>
    toolRng.lognormal(profile.toolS.mean, profile.toolS.std),
  );
  const toolTimesS = matchMeanStd(drawnS, profile.toolS.mean, profile.toolS.std);

  let nextToolCall = 0;
  const width = String(Math.max(1, programs - 1)).length;
  return drafts.map((draft, index): TraceProgram => {
    const turns: TraceTurn[] = [];
    let input = draft.firstPrompt;
    let cached = 0;
    for (let i = 0; i < draft.turnCount; i++) {
      const output = draft.outputs[i]!;
      const isLast = i === draft.turnCount - 1;
      turns.push({
        input,
        cached,
        output,
        tool: isLast ? null : weightedPick(toolRng, profile.tools),
        toolS: isLast ? null : Math.round(toolTimesS[nextToolCall++]! * 1e4) / 1e4,
      });
      cached = input + output;
      input = cached + (draft.observations[i] ?? 0);
    }
    return { id: `${kind}-${String(index).padStart(width, "0")}`, source: `generated ${kind}`, turns };
  });
}
