/** Helpers shared by the engine's tests (fake and llama-backed). */
import assert from "node:assert/strict";
import type { SchedulingPolicy } from "../../core/policy.js";
import { latestProgramFirst, pinnedThenProgramFcfs } from "../../policies/priorities.js";
import type {
  ChatTurn,
  EngineService,
  GenerateEvent,
  GenerateRequest,
  SamplingParams,
} from "../engine-api.js";

export type DoneEvent = Extract<GenerateEvent, { type: "done" }>;

export const GREEDY: SamplingParams = {
  temperature: 0,
  topP: 1,
  topK: 0,
  minP: 0,
  seed: null,
  maxTokens: 400,
  stop: [],
  grammar: null,
  ignoreEos: false,
};

export function request(
  id: string,
  prompt: string,
  options: Partial<Omit<GenerateRequest, "sampling">> & { sampling?: Partial<SamplingParams> } = {},
): GenerateRequest {
  return {
    ...options,
    requestId: id,
    programId: options.programId ?? null,
    isLastStep: options.isLastStep ?? false,
    toolHint: options.toolHint ?? null,
    prompt,
    sampling: { ...GREEDY, ...options.sampling },
  };
}

/** Reads a stream to its end: the concatenated deltas and the done event (exactly one, last). */
export async function collect(
  stream: AsyncIterable<GenerateEvent>,
): Promise<{ deltas: string; done: DoneEvent }> {
  let deltas = "";
  let done: DoneEvent | null = null;
  for await (const event of stream) {
    assert.equal(done, null, "nothing may follow the done event");
    if (event.type === "delta") deltas += event.text;
    else done = event;
  }
  assert.ok(done, "stream ended without a done event");
  return { deltas, done };
}

export function run(engine: EngineService, req: GenerateRequest, signal = new AbortController().signal) {
  return collect(engine.generate(req, signal));
}

/** Pins every non-last turn for a fixed TTL. */
export function fixedTtlPolicy(ttlS: number): SchedulingPolicy {
  return {
    name: "fixed-ttl",
    description: "test: pin every non-last turn for a fixed TTL",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: pinnedThenProgramFcfs,
    retain: () => ({ kind: "pin", ttlS }),
    pinVictimRank: latestProgramFirst,
  };
}

export function chat(user: string): ChatTurn[] {
  return [
    { role: "system", content: "You are a coding agent. Use tools." },
    { role: "user", content: user },
  ];
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
