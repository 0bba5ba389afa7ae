import { Rng } from "../core/rng.js";
import { matchMeanStd } from "./moment-match.js";
import type { TraceProgram, TraceTurn } from "./trace.js";

export const WORKLOAD_KINDS = ["swe-bench", "bfcl", "web-agent", "long-horizon"] as const;
export type WorkloadKind = (typeof WORKLOAD_KINDS)[number];

interface MeanStd {
  mean: number;
  std: number;
}

/** The mean and std of the lognormal whose median and 95th percentile are given. */
export function lognormalFromMedianP95(median: number, p95: number): MeanStd {
  const sigma = Math.log(p95 / median) / 1.6448536269514722;
  const mean = median * Math.exp((sigma * sigma) / 2);
  return { mean, std: mean * Math.sqrt(Math.expm1(sigma * sigma)) };
}

export interface WorkloadProfile {
  /** turns (model calls) per program; normal, rounded, at least 1 */
  turns: MeanStd;
  /**
   * per tool call, lognormal: one distribution for every call, the workload's tool times matched to its mean
   * and std as a whole; or each tool's own, drawn per call
   */
  toolS: MeanStd | { readonly perTool: Readonly<Record<string, MeanStd>> };
  /** the context a program ends with: last prompt + last output; lognormal */
  finalContextTokens: MeanStd;
  /** system prompt + task of the first call; lognormal */
  firstPromptTokens: MeanStd;
  /** per model call; lognormal */
  outputTokens: MeanStd;
  /** tool name -> relative frequency */
  tools: Readonly<Record<string, number>>;
  /**
   * coefficient of variation of the share of a program's growth each tool observation takes (lognormal):
   * 1 lets one observation be many times another (a file dump beside an `ls`), lower grows more steadily
   */
  observationCv: number;
}

/**
 * mini-swe-agent 2.2.7 with DeepSeek-chat on 99 SWE-bench tasks (traces/mini-swe-agent-deepseek-chat.jsonl,
 * `continuum trace stats`): each tool's measured call durations, mean and std in seconds, and its share of
 * the calls (cat 27.5%, grep 22.5%, python 18.9%, sed 12.4%, find 6.1%, pip 3.0%; the rest left out).
 */
const MEASURED_SHELL_TOOLS = {
  cat: { share: 27.5, durationS: { mean: 0.3, std: 0.53 } },
  grep: { share: 22.5, durationS: { mean: 0.27, std: 0.2 } },
  python: { share: 18.9, durationS: { mean: 0.44, std: 2.31 } },
  sed: { share: 12.4, durationS: { mean: 0.25, std: 0.08 } },
  find: { share: 6.1, durationS: { mean: 0.76, std: 0.68 } },
  pip: { share: 3.0, durationS: { mean: 5.46, std: 9.81 } },
} as const;

/**
 * swe-bench and bfcl: turns, tool times and final contexts are the CacheTTL paper's published statistics
 * of its GPT-5 traces; first prompts, outputs, tool mixes and the observation spread are not published,
 * and the values here are assumptions. web-agent and long-horizon: each value names its source beside it,
 * or says it is an assumption (docs/workloads.md lists them).
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
    observationCv: 1,
  },
  // BFCL v4 web search: the model searches and reads pages with these two functions.
  bfcl: {
    turns: { mean: 6.3, std: 2.3 },
    toolS: { mean: 1.923, std: 2.133 },
    finalContextTokens: { mean: 93_256, std: 68_687 },
    firstPromptTokens: { mean: 2500, std: 700 },
    outputTokens: { mean: 150, std: 100 },
    tools: { duckduckgo_search: 55, fetch_url_content: 45 },
    observationCv: 1,
  },
  // A web-search agent: few turns, big page contents, slow remote tools with long tails.
  "web-agent": {
    // BFCL v4 web search (CacheTTL paper); DeepResearchGym's logs of 3.97M agentic search sessions (Ning et
    // al., arXiv 2601.17617) agree: over 90% of sessions take at most ten steps (96% here).
    turns: { mean: 6.3, std: 2.3 },
    // BFCL v4 web search (CacheTTL paper): page contents make a program's context (capped at the model's window).
    finalContextTokens: { mean: 93_256, std: 68_687 },
    firstPromptTokens: { mean: 2500, std: 700 }, // assumption (as bfcl)
    outputTokens: { mean: 150, std: 100 }, // assumption (as bfcl)
    // SGI-Bench's tool-integrated reasoning runs (InternScience): web_search 539 calls, visit_webpage 385.
    tools: { web_search: 58, visit_webpage: 42 },
    toolS: {
      perTool: {
        // a search API: SerpAPI's p50 1.2 s and p95 3.5 s as published by Scavio (2026) beside Serper's
        // 0.4 / 1.1 s and Tavily's 0.8 / 2.2 s: the slowest of them
        web_search: lognormalFromMedianP95(1.2, 3.5),
        // fetching and extracting a page: assumption (median 4 s, p95 30 s; "4-30 second tool-calling loops
        // to fetch a couple of URLs" is what agent builders report). DeepResearchGym bounds it: 89% of its
        // steps, model time included, are under a minute (99% here). The evaluation runs it at 1/3 and 3x too.
        visit_webpage: lognormalFromMedianP95(4, 30),
      },
    },
    observationCv: 1, // assumption (as bfcl)
  },
  // A long-horizon coding agent: many turns, steady growth, mostly fast shell tools and a few slow ones.
  "long-horizon": {
    // AgentX's Claude Code sessions (cc-traces): a median of 43 turns (vLLM's AgentX post, 2026-09-08); the
    // spread is the measured mini-swe-agent trace's (std / mean 27.8 / 80.0 = 0.35).
    turns: { mean: 43, std: 15 },
    // AgentX's median input of 142k tokens does not fit the simulated models' 128k window: assumption, capped
    // at the window.
    finalContextTokens: { mean: 100_000, std: 20_000 },
    firstPromptTokens: { mean: 3000, std: 800 }, // assumption (as swe-bench)
    // AgentX's median output, 444 tokens; the spread is the measured mini-swe-agent trace's (309 / 222).
    outputTokens: { mean: 444, std: 618 },
    tools: Object.fromEntries(Object.entries(MEASURED_SHELL_TOOLS).map(([name, t]) => [name, t.share])),
    toolS: {
      perTool: Object.fromEntries(
        Object.entries(MEASURED_SHELL_TOOLS).map(([name, t]) => [name, t.durationS]),
      ),
    },
    // assumption: steady growth, each observation within about a third of the program's mean one
    observationCv: 0.3,
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
  const weights = Array.from({ length: observationCount }, () => rng.lognormal(1, profile.observationCv));
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
  const { toolS } = profile;
  const perTool = "perTool" in toolS ? toolS.perTool : null;
  const toolTimesS =
    "perTool" in toolS
      ? []
      : matchMeanStd(
          Array.from({ length: toolCalls }, () => toolRng.lognormal(toolS.mean, toolS.std)),
          toolS.mean,
          toolS.std,
        );
  const toolCall = (): { tool: string; toolS: number } => {
    const tool = weightedPick(toolRng, profile.tools);
    const duration = perTool?.[tool];
    const toolS = duration ? toolRng.lognormal(duration.mean, duration.std) : toolTimesS[nextToolCall++]!;
    return { tool, toolS: Math.round(toolS * 1e4) / 1e4 };
  };

  let nextToolCall = 0;
  const width = String(Math.max(1, programs - 1)).length;
  return drafts.map((draft, index): TraceProgram => {
    const turns: TraceTurn[] = [];
    let input = draft.firstPrompt;
    let cached = 0;
    for (let i = 0; i < draft.turnCount; i++) {
      const output = draft.outputs[i]!;
      const isLast = i === draft.turnCount - 1;
      turns.push({ input, cached, output, ...(isLast ? { tool: null, toolS: null } : toolCall()) });
      cached = input + output;
      input = cached + (draft.observations[i] ?? 0);
    }
    return { id: `${kind}-${String(index).padStart(width, "0")}`, source: `generated ${kind}`, turns };
  });
}
