import { renameSync, writeFileSync } from "node:fs";
import { summarize } from "../analysis/stats.js";
import { VirtualClock } from "../core/clock.js";
import { type CostModel, quadraticCostModel } from "../core/cost/cost-model.js";
import { GIB, type TierConfig, tierConfigs } from "../core/kv/offload-tiers.js";
import { type EventRecorder, MemorySink, Recorder } from "../core/recorder/recorder.js";
import { Scheduler } from "../core/scheduler.js";
import type { StepPlan } from "../core/step-plan.js";
import type { TraceProgram } from "../workload/trace.js";
import { traceStats } from "../workload/trace-stats.js";
import { createSimPolicy } from "./clairvoyant.js";
import { createRouter, type RouterName, runClusterSimulation } from "./cluster.js";
import { type ProgramOutcome, runSimulation, type SimProgramSpec, type TurnOutcome } from "./event-loop.js";
import { type GatewaySimStats, SimGatewayExecutor } from "./gateway-sim.js";
import type { HardwareProfile } from "./hardware/profiles.js";
import { stepAccumulatorFor } from "./hardware/step-latency.js";
import { type SeqOpPrices, seqOpsS } from "./seq-op-cost.js";

export interface EngineOptions {
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly blockSizeTokens: number;
  /** CPU offload tier size; policies that need a tier get `defaultOffloadGb` when this is 0 */
  readonly cpuOffloadGb: number;
  readonly diskOffloadGb: number;
  readonly defaultOffloadGb: number;
  /** cap on KV pool tokens (0 = the hardware profile's capacity) */
  readonly kvCapacityTokens: number;
  /** identical engine instances (each with the whole profile's GPUs) behind a router */
  readonly replicas: number;
  readonly router: RouterName;
  /**
   * the policy runs in a gateway in front of an engine with vLLM's FCFS, an LRU prefix cache and no pins
   * (gateway-sim.ts; one replica)
   */
  readonly gateway: boolean;
}

/** KV tokens one replica's pool holds: the cap when one is set, else what the GPU's memory holds. */
export function kvPoolTokensOf(profile: HardwareProfile, engine: EngineOptions): number {
  return engine.kvCapacityTokens > 0 ? engine.kvCapacityTokens : profile.kvCapacityTokens;
}

export const DEFAULT_ENGINE_OPTIONS: EngineOptions = {
  maxNumSeqs: 256,
  maxNumBatchedTokens: 2048,
  blockSizeTokens: 16,
  cpuOffloadGb: 0,
  diskOffloadGb: 0,
  defaultOffloadGb: 200,
  kvCapacityTokens: 0,
  replicas: 1,
  router: "sticky-least-loaded",
  gateway: false,
};

export interface PointSpec {
  readonly policy: string;
  readonly programs: readonly TraceProgram[];
  readonly arrivalsS: readonly number[];
  readonly profile: HardwareProfile;
  readonly engine: EngineOptions;
  readonly jps: number;
  readonly seed: number;
  /** optional faults: per program index, abort a turn after some seconds */
  readonly aborts?: ReadonlyMap<number, { turn: number; afterS: number }>;
  readonly horizonS?: number;
  /** write the scheduler's event log (the server's --record format) to `<recordPath>.jsonl` */
  readonly recordPath?: string;
}

export interface Distribution {
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
}

export interface UsageSample {
  readonly timeS: number;
  /** fraction of KV blocks in use, and the part of it held by pins */
  readonly used: number;
  readonly pinned: number;
}

export interface PointResult {
  policy: string;
  jps: number;
  programs: number;
  completed: number;
  jct: Distribution;
  /**
   * Mean JCT over every program, counting a program unfinished at the horizon as (horizon - arrival): a
   * lower bound of the true mean that is exact when every program finished.
   */
  jct_floor_mean_s: number;
  throughput_jps: number;
  makespan_s: number;
  hit_ratio: number;
  preemptions: number;
  queue_delay: Distribution;
  ttft: Distribution;
  /** TTFT of programs' first turns: how long a new program waits behind returning turns and admission */
  first_turn_ttft: Distribution;
  /**
   * each started program's waits summed over its turns (arrival to first admission): where a policy makes
   * a program wait, first turn or later (a pausing or admission-holding policy shows here)
   */
  program_wait: Distribution;
  prefill_tokens_saved: number;
  reload_tokens: number;
  pins: { created: number; reused: number; expired: number; sacrificed: number; duration: Distribution };
  /**
   * What CacheTTL's TTL machinery saw and did by the end of the run: eta (memoryfulness), T (mean queueing
   * delay, s), how many TTLs each rule set (T_default before K tool samples, the global CDF, the tool's own
   * CDF), and the TTLs pins were given (s). Policies that never ask the cost model show zero decisions.
   */
  ttl: {
    eta: number;
    queueing_s: number;
    decisions: { default: number; global: number; tool: number };
    pinned_ttl_s: Distribution;
  };
  steps: number;
  /**
   * Where the accelerator's time went: the share of makespan x replicas spent in steps, seconds of steps
   * that prefilled (decode tokens ride along) and of decode-only steps, and sequences per step.
   */
  gpu: { busy_fraction: number; prefill_step_s: number; decode_step_s: number; sequences_per_step: number };
  /** Σcached / Σinput of the simulated programs: the hit ratio a cache that never forgets would reach */
  reusable_share: number;
  /** per-program JCTs (seconds) in program order, for CDFs */
  jcts: number[];
  /** each started program's first-turn TTFT (seconds), for tails pooled over runs */
  first_turn_ttfts: number[];
  /** each started program's total wait (seconds, see program_wait), for tails pooled over runs */
  program_waits: number[];
  kv_usage: UsageSample[];
  /** `--gateway`: the keep-alives the gateway sent its engine for pinned prefixes, and what they cost */
  gateway?: {
    keepalives: number;
    keepalive_computed_tokens: number;
    /** share of the engine's step time the keep-alives' computed tokens took, by tokens */
    keepalive_token_share: number;
  };
}

const USAGE_SAMPLES = 200;

/** Simulates one (policy, load) point with the real scheduler and a GPU latency model. */
export function simulatePoint(spec: PointSpec): PointResult {
  const { profile, engine } = spec;
  const clock = new VirtualClock();
  const pins = new PinDurationRecorder();
  const log = spec.recordPath ? new MemorySink() : null;
  const recorder: EventRecorder = log ? new TeeRecorder([pins, new Recorder(log)]) : pins;
  if (engine.gateway && engine.replicas > 1) {
    throw new Error("--gateway simulates one engine: give --replicas 1");
  }
  const numBlocks = Math.floor(kvPoolTokensOf(profile, engine) / engine.blockSizeTokens);
  // Each replica has its own policy: policies learn from what they schedule (tool times, program sizes).
  // In a gateway the engine runs vLLM's FCFS without pins; the policy schedules in the gateway, over a model of
  // the engine's KV (a pass-through `vllm` gateway over one too large to ever hold a turn back).
  const engines = engine.gateway
    ? [createSimScheduler("vllm", spec.programs, profile, engine, clock, null)]
    : Array.from({ length: engine.replicas }, () =>
        createSimScheduler(spec.policy, spec.programs, profile, engine, clock, recorder),
      );
  const gatewayScheduler = engine.gateway
    ? gatewayModel(spec, numBlocks, simCostModel(profile), clock, recorder)
    : null;
  const schedulers = gatewayScheduler ? [gatewayScheduler] : engines;
  const gpu: GpuTime = { prefillStepS: 0, decodeStepS: 0, sequences: 0, steps: 0 };
  const stepTimeS = createStepTimer(profile, gpu);
  const specs: SimProgramSpec[] = spec.programs.map((program, i) => ({
    id: program.id,
    arrivalS: spec.arrivalsS[i] ?? 0,
    turns: program.turns,
    abortTurnAfterS: spec.aborts?.get(i),
  }));
  const usage: UsageSample[] = [];
  const expectedEndS = (spec.arrivalsS[spec.arrivalsS.length - 1] ?? 0) * 1.5 + 60;
  let nextSampleS = 0;
  const sampleUsage = () => {
    const nowS = clock.nowS();
    if (nowS < nextSampleS) return;
    nextSampleS = nowS + expectedEndS / USAGE_SAMPLES;
    let used = 0;
    let pinned = 0;
    for (const s of engines) used += s.kvUsageFraction();
    for (const s of schedulers) pinned += s.numPinnedTokens / engine.blockSizeTokens / numBlocks;
    usage.push({ timeS: nowS, used: used / engines.length, pinned: pinned / schedulers.length });
  };
  const common = {
    clock,
    blockSizeTokens: engine.blockSizeTokens,
    stepTimeS,
    seedSalt: spec.seed,
    horizonS: spec.horizonS,
    onStep: sampleUsage,
  };
  const gatewayExecutor = gatewayScheduler
    ? new SimGatewayExecutor(engines[0] as Scheduler, clock, stepTimeS, sampleUsage)
    : null;
  const result = gatewayExecutor
    ? runSimulation(specs, {
        ...common,
        scheduler: gatewayScheduler as Scheduler,
        executor: gatewayExecutor,
        onFinished: (finished) => {
          for (const request of finished) gatewayExecutor.turnFinished(request);
        },
      })
    : schedulers.length === 1
      ? runSimulation(specs, { ...common, scheduler: schedulers[0] as Scheduler })
      : runClusterSimulation(specs, { ...common, schedulers, router: createRouter(engine.router) });
  if (log && spec.recordPath) {
    // Simulated runs are bounded, so the log is kept in memory and written once, atomically.
    writeFileSync(`${spec.recordPath}.jsonl.tmp`, log.toJsonl());
    renameSync(`${spec.recordPath}.jsonl.tmp`, `${spec.recordPath}.jsonl`);
  }
  const point = summarizePoint(
    spec,
    result.programs,
    result.endS,
    { engines, schedulers },
    pins,
    result.steps,
    usage,
    gpu,
    gatewayExecutor?.stats ?? null,
  );
  return point;
}

/** The cost model a simulated scheduler prices prefills and reloads with. */
function simCostModel(profile: HardwareProfile): CostModel {
  return quadraticCostModel({
    prefillQuadratic: profile.prefillQuadratic,
    kvBytesPerToken: profile.kvBytesPerToken,
    reloadBandwidthBps: { cpu: profile.cpuOffloadBandwidthBps, disk: profile.diskBandwidthBps },
  });
}

/**
 * One replica's scheduler: the policy (fresh), its KV pool and offload tiers, and the cost model; `recorder`
 * null: its events are not recorded (the engine behind a gateway, whose turns the gateway records).
 */
export function createSimScheduler(
  policyName: string,
  programs: readonly TraceProgram[],
  profile: HardwareProfile,
  engine: EngineOptions,
  clock: VirtualClock,
  recorder: EventRecorder | null,
): Scheduler {
  const policy = createSimPolicy(policyName, programs);
  return new Scheduler(
    {
      numBlocks: Math.floor(kvPoolTokensOf(profile, engine) / engine.blockSizeTokens),
      blockSizeTokens: engine.blockSizeTokens,
      maxNumBatchedTokens: engine.maxNumBatchedTokens,
      maxNumSeqs: engine.maxNumSeqs,
      kvBytesPerToken: profile.kvBytesPerToken,
      tiers: offloadTiers(profile, engine, policy.needsOffload),
      costs: simCostModel(profile),
    },
    { clock, policy, ...(recorder === null ? {} : { recorder }) },
  );
}

/** The gateway's scheduler: the policy over a model of the engine's KV (forward-at-once for `vllm`). */
function gatewayModel(
  spec: PointSpec,
  numBlocks: number,
  costs: CostModel,
  clock: VirtualClock,
  recorder: EventRecorder,
): Scheduler {
  const policy = createSimPolicy(spec.policy, spec.programs);
  if (policy.needsOffload) {
    throw new Error(
      `${spec.policy} needs an offload tier, which is the engine's own: not a gateway's policy`,
    );
  }
  const passThrough = policy.name === "vllm";
  const blocks = passThrough ? numBlocks * GATEWAY_PASS_THROUGH_FACTOR : numBlocks;
  return new Scheduler(
    {
      numBlocks: blocks,
      blockSizeTokens: spec.engine.blockSizeTokens,
      maxNumBatchedTokens: blocks * spec.engine.blockSizeTokens,
      maxNumSeqs: passThrough ? GATEWAY_PASS_THROUGH_SEQS : spec.engine.maxNumSeqs,
      kvBytesPerToken: spec.profile.kvBytesPerToken,
      costs,
    },
    { clock, policy, recorder },
  );
}

/** A step's time by the latency model plus its reload transfers, summed by kind into `gpu`. */
export function createStepTimer(profile: HardwareProfile, gpu: GpuTime): (plan: StepPlan) => number {
  const accumulator = stepAccumulatorFor(profile.latency);
  const opPrices: SeqOpPrices = {
    kvBytesPerToken: profile.kvBytesPerToken,
    bandwidthBps: { cpu: profile.cpuOffloadBandwidthBps, disk: profile.diskBandwidthBps },
  };
  return (plan: StepPlan) => {
    accumulator.beginStep();
    let prefills = false;
    for (const chunk of plan.chunks) {
      accumulator.addChunk(chunk.numTokens, chunk.contextTokens);
      if (chunk.numTokens > 1) prefills = true;
    }
    let reloadS = 0;
    for (const reload of plan.reloads) {
      const bandwidth = reload.tier === "cpu" ? profile.cpuOffloadBandwidthBps : profile.diskBandwidthBps;
      reloadS += (reload.tokens * profile.kvBytesPerToken) / bandwidth;
    }
    const durationS = accumulator.endStepS() + reloadS + seqOpsS(plan.ops, opPrices);
    if (prefills) gpu.prefillStepS += durationS;
    else gpu.decodeStepS += durationS;
    gpu.sequences += plan.chunks.length;
    if (plan.chunks.length > 0) gpu.steps++;
    return durationS;
  };
}

/** The `vllm` gateway forwards at once: its model is this many times the engine, and runs this many turns. */
const GATEWAY_PASS_THROUGH_FACTOR = 64;
const GATEWAY_PASS_THROUGH_SEQS = 65536;

class TeeRecorder implements EventRecorder {
  constructor(private readonly targets: readonly EventRecorder[]) {}

  record(event: Parameters<EventRecorder["record"]>[0]): void {
    for (const target of this.targets) target.record(event);
  }

  async close(): Promise<void> {
    await Promise.all(this.targets.map((t) => t.close()));
  }
}

function offloadTiers(profile: HardwareProfile, engine: EngineOptions, needsOffload: boolean): TierConfig[] {
  const cpuGib = engine.cpuOffloadGb > 0 ? engine.cpuOffloadGb : needsOffload ? engine.defaultOffloadGb : 0;
  return tierConfigs({
    cpuBytes: cpuGib * GIB,
    diskBytes: engine.diskOffloadGb * GIB,
    cpuBandwidthBps: profile.cpuOffloadBandwidthBps,
    diskBandwidthBps: profile.diskBandwidthBps,
  });
}

function distribution(xs: readonly number[]): Distribution {
  const s = summarize(xs);
  return { mean: s.mean, p50: s.p50, p90: s.p90, p95: s.p95, p99: s.p99 };
}

/** Step time by kind, summed over the run (every replica). */
export interface GpuTime {
  prefillStepS: number;
  decodeStepS: number;
  sequences: number;
  steps: number;
}

function summarizePoint(
  spec: PointSpec,
  outcomes: readonly ProgramOutcome[],
  endS: number,
  /** the engines (prefix hits, preemptions, their time) and the schedulers the policy ran in (pins, TTLs) */
  { engines, schedulers }: { engines: readonly Scheduler[]; schedulers: readonly Scheduler[] },
  pins: PinDurationRecorder,
  steps: number,
  usage: UsageSample[],
  gpu: GpuTime,
  gateway: GatewaySimStats | null,
): PointResult {
  const completed = outcomes.filter((p) => p.finishS !== null);
  const jcts = completed.map((p) => (p.finishS as number) - p.arrivalS);
  const firstArrivalS = Math.min(...outcomes.map((p) => p.arrivalS));
  const lastDepartureS = Math.max(firstArrivalS, ...completed.map((p) => p.finishS as number));
  const makespanS = lastDepartureS - firstArrivalS;
  const turns = outcomes.flatMap((p) => p.turns);
  const queueDelays = turns
    .filter((t) => t.admittedS !== null)
    .map((t) => (t.admittedS as number) - t.arrivalS);
  const ttftOf = (ofTurns: readonly TurnOutcome[]) =>
    ofTurns.filter((t) => t.firstTokenS !== null).map((t) => (t.firstTokenS as number) - t.arrivalS);
  const firstTurnTtfts = ttftOf(outcomes.flatMap((p) => p.turns.slice(0, 1)));
  const programWaits = outcomes
    .filter((p) => p.turns.some((t) => t.admittedS !== null))
    .map((p) => p.turns.reduce((sum, t) => sum + (t.admittedS === null ? 0 : t.admittedS - t.arrivalS), 0));
  const sum = (of: (s: Scheduler) => number) => schedulers.reduce((total, s) => total + of(s), 0);
  const sumEngines = (of: (s: Scheduler) => number) => engines.reduce((total, s) => total + of(s), 0);
  const meanOf = (of: (s: Scheduler) => number) => sum(of) / schedulers.length;
  // a gateway's keep-alives are its own requests, not the programs': left out of the hit ratio
  const stats = {
    prefixQueryTokens: sumEngines((s) => s.stats.prefixQueryTokens) - (gateway?.keepAlivePromptTokens ?? 0),
    prefixHitTokens: sumEngines((s) => s.stats.prefixHitTokens) - (gateway?.keepAliveCachedTokens ?? 0),
    reloadTokens: sumEngines((s) => s.stats.reloadTokens),
    preemptions: sumEngines((s) => s.stats.preemptions),
    pinsCreated: sum((s) => s.stats.pinsCreated),
    pinsReused: sum((s) => s.stats.pinsReused),
    pinsExpired: sum((s) => s.stats.pinsExpired),
    pinsSacrificed: sum((s) => s.stats.pinsSacrificed),
  };
  const decisions = (source: "default" | "global" | "tool") => sum((s) => s.ttl.decisionsBySource[source]);
  return {
    policy: spec.policy,
    jps: spec.jps,
    programs: outcomes.length,
    completed: completed.length,
    jct: distribution(jcts),
    jct_floor_mean_s:
      outcomes.length === 0
        ? 0
        : outcomes.reduce((sum, p) => sum + (p.finishS ?? Math.max(endS, p.arrivalS)) - p.arrivalS, 0) /
          outcomes.length,
    throughput_jps: makespanS > 0 ? completed.length / makespanS : 0,
    makespan_s: makespanS,
    hit_ratio: stats.prefixQueryTokens > 0 ? stats.prefixHitTokens / stats.prefixQueryTokens : 0,
    preemptions: stats.preemptions,
    queue_delay: distribution(queueDelays),
    ttft: distribution(ttftOf(turns)),
    first_turn_ttft: distribution(firstTurnTtfts),
    program_wait: distribution(programWaits),
    prefill_tokens_saved: stats.prefixHitTokens - stats.reloadTokens,
    reload_tokens: stats.reloadTokens,
    pins: {
      created: stats.pinsCreated,
      reused: stats.pinsReused,
      expired: stats.pinsExpired,
      sacrificed: stats.pinsSacrificed,
      duration: distribution(pins.durationsS),
    },
    ttl: {
      eta: meanOf((s) => s.ttl.memoryfulness.eta()),
      queueing_s: meanOf((s) => s.ttl.queueing.meanS()),
      decisions: { default: decisions("default"), global: decisions("global"), tool: decisions("tool") },
      pinned_ttl_s: distribution(pins.ttlsS),
    },
    steps,
    gpu: {
      busy_fraction: makespanS > 0 ? (gpu.prefillStepS + gpu.decodeStepS) / (makespanS * engines.length) : 0,
      prefill_step_s: gpu.prefillStepS,
      decode_step_s: gpu.decodeStepS,
      sequences_per_step: gpu.steps > 0 ? gpu.sequences / gpu.steps : 0,
    },
    reusable_share: traceStats(spec.programs).reusableFraction,
    jcts,
    first_turn_ttfts: firstTurnTtfts,
    program_waits: programWaits,
    kv_usage: usage,
    ...(gateway === null
      ? {}
      : {
          gateway: {
            keepalives: gateway.keepAlives,
            keepalive_computed_tokens: gateway.keepAliveComputedTokens,
            keepalive_token_share:
              gateway.computedTokens > 0 ? gateway.keepAliveComputedTokens / gateway.computedTokens : 0,
          },
        }),
  };
}

/** Tracks only pin lifetimes and TTLs: the full recorder would cost a JSON line per event in a sweep. */
class PinDurationRecorder implements EventRecorder {
  readonly durationsS: number[] = [];
  readonly ttlsS: number[] = [];
  private readonly pinnedAtS = new Map<string, number>();

  record(event: Parameters<EventRecorder["record"]>[0]): void {
    if (event.kind === "pinned") {
      this.pinnedAtS.set(event.programId, event.timeS);
      this.ttlsS.push(event.ttlS);
    } else if (event.kind === "unpinned") {
      const startS = this.pinnedAtS.get(event.programId);
      if (startS !== undefined) this.durationsS.push(event.timeS - startS);
      this.pinnedAtS.delete(event.programId);
    }
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
