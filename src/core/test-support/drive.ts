import { VirtualClock } from "../clock.js";
import { quadraticCostModel } from "../cost/cost-model.js";
import type { TierConfig } from "../kv/offload-tiers.js";
import { hashTokenBlock, ROOT_HASH } from "../kv/prefix-hash.js";
import { BlockHashContent } from "../kv/token-content.js";
import type { SchedulingPolicy } from "../policy.js";
import type { RecorderEvent } from "../recorder/events.js";
import type { EventRecorder } from "../recorder/recorder.js";
import type { Request } from "../request.js";
import { Scheduler } from "../scheduler.js";
import type { KvRelease, SampledToken, StepPlan } from "../step-plan.js";

/** Keeps every recorder event in memory. */
export class CapturingRecorder implements EventRecorder {
  readonly events: RecorderEvent[] = [];

  record(event: RecorderEvent): void {
    this.events.push(event);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  ofKind<K extends RecorderEvent["kind"]>(kind: K): Extract<RecorderEvent, { kind: K }>[] {
    return this.events.filter((e): e is Extract<RecorderEvent, { kind: K }> => e.kind === kind);
  }
}

export interface TestSchedulerOptions {
  readonly numBlocks: number;
  readonly maxNumBatchedTokens?: number;
  readonly maxNumSeqs?: number;
  readonly tiers?: readonly TierConfig[];
  /** prefill seconds per token (linear cost); default 1e-4 as in harness.ts */
  readonly prefillSPerToken?: number;
  readonly maxPrograms?: number;
}

/**
 * Same configuration as harness.ts's testScheduler (16-token blocks, 1 KiB per token, linear prefill,
 * cpu 1 GB/s, disk 100 MB/s) plus an event log.
 */
export function loggedScheduler(policy: SchedulingPolicy, options: TestSchedulerOptions) {
  const clock = new VirtualClock();
  const log = new CapturingRecorder();
  const scheduler = new Scheduler(
    {
      numBlocks: options.numBlocks,
      blockSizeTokens: 16,
      maxNumBatchedTokens: options.maxNumBatchedTokens ?? 256,
      maxNumSeqs: options.maxNumSeqs ?? 16,
      kvBytesPerToken: 1024,
      tiers: options.tiers,
      ...(options.maxPrograms ? { maxPrograms: options.maxPrograms } : {}),
      costs: quadraticCostModel({
        prefillQuadratic: { a: 0, b: options.prefillSPerToken ?? 1e-4, c: 0 },
        kvBytesPerToken: 1024,
        reloadBandwidthBps: { cpu: 1e9, disk: 1e8 },
      }),
    },
    { clock, policy, recorder: log },
  );
  return { scheduler, clock, log };
}

/** n distinct token ids starting at `from` (different `from` ranges never collide for n < 1e6). */
export function tokenRange(n: number, from: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** Chained prefix hashes of every full block of `tokens`, exactly as the engine would hash them. */
export function blockHashes(tokens: readonly number[], blockSizeTokens = 16): number[] {
  const out: number[] = [];
  let parent = ROOT_HASH;
  for (let end = blockSizeTokens; end <= tokens.length; end += blockSizeTokens) {
    parent = hashTokenBlock(parent, tokens, end - blockSizeTokens, end);
    out.push(parent);
  }
  return out;
}

/** Content of a whole sequence (prompt followed by the output it will produce). */
export function contentOf(tokens: readonly number[], blockSizeTokens = 16): BlockHashContent {
  return new BlockHashContent(blockHashes(tokens, blockSizeTokens));
}

export interface AddOptions {
  readonly programId?: string | null;
  readonly maxOutputTokens?: number;
  readonly isLastStep?: boolean;
  readonly toolHint?: string | null;
  /** earlier turns of its program the request carries */
  readonly priorTurns?: number;
  /** full sequence (prompt + output); defaults to fresh tokens unique to the request id */
  readonly sequence?: readonly number[];
  /** the program that spawned this one as a subagent */
  readonly parentProgramId?: string;
}

let freshTokenBase = 10_000_000;

/** Adds a request whose prompt is `promptTokens` long; its sequence is fresh unless given. */
export function addRequest(scheduler: Scheduler, id: string, promptTokens: number, options: AddOptions = {}) {
  const maxOutputTokens = options.maxOutputTokens ?? 1;
  freshTokenBase += 1_000_000;
  const sequence = options.sequence ?? tokenRange(promptTokens + maxOutputTokens, freshTokenBase);
  return scheduler.addRequest({
    requestId: id,
    programId: options.programId === undefined ? `p-${id}` : options.programId,
    promptTokens,
    maxOutputTokens,
    isLastStep: options.isLastStep ?? false,
    toolHint: options.toolHint === undefined ? "tool" : options.toolHint,
    ...(options.priorTurns === undefined ? {} : { priorTurns: options.priorTurns }),
    ...(options.parentProgramId === undefined ? {} : { parentProgramId: options.parentProgramId }),
    content: contentOf(sequence),
  });
}

export interface StepOutcome {
  readonly plan: StepPlan;
  readonly finished: readonly Request[];
  /** KV released since the previous step's plan: the previous update's releases, then this plan's */
  readonly released: readonly KvRelease[];
}

/** Releases each scheduler's last update() made, reported with the next step. */
const releasedByUpdate = new WeakMap<Scheduler, readonly KvRelease[]>();

/**
 * One engine step: schedule, advance the clock by `durationS`, update. Requests listed in `stops` stop
 * when they sample. Checks the scheduler's invariants after the step.
 */
export function step(
  scheduler: Scheduler,
  clock: VirtualClock,
  durationS = 0.01,
  stops: readonly string[] | ReadonlyMap<string, SampledToken> = [],
): StepOutcome {
  const plan = scheduler.schedule();
  clock.advanceTo(clock.nowS() + durationS);
  const sampled = Array.isArray(stops)
    ? new Map(stops.map((id) => [id, { stop: true }]))
    : (stops as ReadonlyMap<string, SampledToken>);
  const { finished, kvChanges } = scheduler.update(plan, { durationS, sampled });
  scheduler.checkInvariants();
  const released = [...(releasedByUpdate.get(scheduler) ?? []), ...plan.released];
  releasedByUpdate.set(scheduler, kvChanges.released);
  return { plan, finished, released };
}

/** Steps until nothing is live (at most maxSteps); returns every finished request in order. */
export function runUntilIdle(
  scheduler: Scheduler,
  clock: VirtualClock,
  durationS = 0.01,
  maxSteps = 10_000,
): Request[] {
  const finished: Request[] = [];
  for (let i = 0; i < maxSteps && scheduler.hasUnfinishedRequests(); i++) {
    finished.push(...step(scheduler, clock, durationS).finished);
  }
  if (scheduler.hasUnfinishedRequests()) throw new Error(`still busy after ${maxSteps} steps`);
  return finished;
}

/** Ids of the requests holding a chunk in the plan, in plan order. */
export function chunkIds(plan: StepPlan): string[] {
  return plan.chunks.map((c) => c.request.id);
}
