import type { CalibratedCostModel } from "../core/calibrated-cost-model.js";
import type { Clock } from "../core/clock.js";
import type { TokenIdContent } from "../core/kv/token-content.js";
import type { Request } from "../core/request.js";
import type { Executor } from "../core/step-loop.js";
import type { KvChanges, SampledToken, ScheduledChunk, StepPlan, StepResult } from "../core/step-plan.js";
import { type ActiveRequest, type ActiveRequests, failActive, pushDelta } from "./active-request.js";
import {
  EngineRejection,
  type OutputLogprob,
  type PromptLogprob,
  type SamplingParams,
} from "./engine-api.js";
import type { KvSlot, KvSlots } from "./kv-slots.js";
import {
  type ModelRunner,
  RunnerBatch,
  type RunnerSampling,
  type SampledLogprobs,
  type SampledOutput,
  type ScoredOutput,
} from "./model-runner.js";
import type { StepLogFile } from "./step-log.js";

/** Counters of the engine's executor (for benchmarks and the TS overhead measurement). */
export interface EngineLoopStats {
  steps: number;
  /** rows sent to the runner: prefill (prompt and recompute) and decode tokens */
  batchedTokens: number;
  sampledTokens: number;
  /** wall time of steps, the part the runner reported as model compute, and of that the host's sampling */
  stepWallS: number;
  computeS: number;
  sampleS: number;
  failedSteps: number;
}

export interface LlamaExecutorDeps {
  readonly runner: ModelRunner;
  readonly kv: KvSlots;
  /** the generate() calls in flight; the executor streams their tokens and fails them when a step fails */
  readonly active: ActiveRequests;
  readonly clock: Clock;
  /** the TTL model's prices, learnt from the steps run (null: the caller gave fixed costs) */
  readonly calibratedCosts: CalibratedCostModel | null;
  readonly stepLog: StepLogFile | null;
}

/** Whether a request's sampling has a penalty, which counts the tokens it has taken. */
function penalized(s: SamplingParams): boolean {
  return (
    (s.presencePenalty ?? 0) !== 0 || (s.frequencyPenalty ?? 0) !== 0 || (s.repetitionPenalty ?? 1) !== 1
  );
}

/** A bias no logit outweighs: the token is drawn whatever the sampling (a spent thinking budget's close). */
const FORCING_BIAS = 1e9;

/**
 * The runner's sampler for a request; `prompt`: its prompt's tokens, asked for only where they count;
 * `banned`: tokens it may not sample now (min_tokens not reached yet); `forced`: the token it must draw next.
 */
function toRunnerSampling(
  s: SamplingParams,
  prompt: () => Int32Array,
  banned: readonly number[],
  forced: number | null,
): RunnerSampling | null {
  const logitBias = [
    ...(s.logitBias ?? []),
    ...banned.map((token) => ({ token, bias: Number.NEGATIVE_INFINITY })),
    ...(forced === null ? [] : [{ token: forced, bias: FORCING_BIAS }]),
  ];
  const logprobs = s.logprobs ?? null;
  if (
    s.temperature <= 0 &&
    s.grammar === null &&
    logitBias.length === 0 &&
    !penalized(s) &&
    logprobs === null
  ) {
    return null;
  }
  const repetitionPenalty = s.repetitionPenalty ?? 1;
  return {
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP,
    minP: s.minP,
    seed: s.seed,
    grammar: s.grammar,
    logitBias,
    presencePenalty: s.presencePenalty ?? 0,
    frequencyPenalty: s.frequencyPenalty ?? 0,
    repetitionPenalty,
    promptTokens: repetitionPenalty !== 1 ? prompt() : null,
    logprobs,
  };
}

/**
 * A token's logprobs with each token as its bytes (control tokens by name, as a template writes them), the
 * alternatives with their ids (a prompt's logprobs report them).
 */
function outputLogprob(
  runner: ModelRunner,
  token: number,
  sampled: SampledLogprobs,
): OutputLogprob & Pick<PromptLogprob, "top"> {
  return {
    bytes: runner.templatePiece(token),
    logprob: sampled.logprob,
    top: sampled.top.map((t) => ({
      token: t.token,
      bytes: runner.templatePiece(t.token),
      logprob: t.logprob,
    })),
  };
}

/** Positions [from, to) of a chunk's request, computed into its slot in one batch. */
interface RowRange {
  readonly chunk: ScheduledChunk;
  readonly slot: KvSlot;
  readonly from: number;
  readonly to: number;
}

/** Whether the runner's sampler keeps state from the output so far (a grammar's position, penalty counts). */
function samplerFollowsOutput(s: SamplingParams): boolean {
  return s.grammar !== null || penalized(s);
}

/**
 * The step loop's executor on llama.cpp: follow the plan's KV ownership changes, materialise admitted
 * requests' prefixes in runner slots, then ONE batch of every chunk (decode tokens, prefill chunks, and
 * whatever admitted prefix the engine no longer held); sampled tokens are detokenized, checked against
 * stop strings, EOS and max tokens, and streamed. What went wrong is said in the StepResult (`failed`,
 * `recomputed`): the scheduler changes only in its own update().
 */
export class LlamaExecutor implements Executor<Promise<StepResult>> {
  readonly stats: EngineLoopStats = {
    steps: 0,
    batchedTokens: 0,
    sampledTokens: 0,
    stepWallS: 0,
    computeS: 0,
    sampleS: 0,
    failedSteps: 0,
  };
  private readonly batch = new RunnerBatch(1024);

  constructor(private readonly deps: LlamaExecutorDeps) {}

  applyKvChanges(changes: KvChanges): void {
    this.deps.kv.apply(changes);
  }

  async execute(plan: StepPlan): Promise<StepResult> {
    const { kv } = this.deps;
    const t0 = performance.now();
    const startS = this.deps.clock.nowS();
    const restoredBefore = kv.stats.restoredTokens;
    kv.apply(plan);
    let computeS = 0;
    let sampleS = 0;
    const sampled = new Map<string, SampledToken>();
    const recomputed = new Map<string, number>();
    const failed = new Set<string>();
    const inBatch: { chunk: ScheduledChunk; rows: number }[] = [];
    try {
      await kv.followPool();
      const checkpoints = await this.admit(plan, recomputed, failed);
      await kv.spillCache();
      // the rows of one batch, or of two where a sliding-window model's request is to leave a checkpoint of
      // the prefix it computed again (kv-slots.ts): its rows past that point run after it is made
      const rows: RowRange[] = [];
      const afterCheckpoints: RowRange[] = [];
      for (const chunk of plan.chunks) {
        const request = chunk.request;
        if (request.status !== "running" || failed.has(request.id)) continue;
        const slot = kv.slotOf(request);
        if (!slot) throw new Error(`running request ${request.id} has no sequence slot`);
        const end = chunk.startToken + chunk.numTokens;
        // positions past the chunk's start that the slot holds are this request's own, kept at admission
        // (slot-cells.ts, heldPast): not computed again, but for the row whose logits the chunk samples
        if (slot.content !== request.content) kv.truncate(slot, chunk.startToken);
        else if (chunk.samples && slot.length >= end) kv.truncate(slot, end - 1);
        const from = Math.min(slot.length, end);
        const at = checkpoints.get(request);
        if (at !== undefined && from < at && at < end) {
          rows.push({ chunk, slot, from, to: at });
          afterCheckpoints.push({ chunk, slot, from: at, to: end });
        } else if (from < end) {
          rows.push({ chunk, slot, from, to: end });
        }
        inBatch.push({ chunk, rows: end - from });
      }
      if (rows.length > 0) ({ computeS, sampleS } = await this.runRows(rows, sampled, failed));
      for (const [request, at] of checkpoints) await kv.checkpoint(request, at);
      if (afterCheckpoints.length > 0) {
        const times = await this.runRows(afterCheckpoints, sampled, failed);
        computeS += times.computeS;
        sampleS += times.sampleS;
      }
    } catch (error) {
      sampled.clear();
      this.failStep(plan, error, failed);
    }
    const durationS = (performance.now() - t0) / 1000;
    const ran = inBatch.map(({ chunk, rows }) => [rows, chunk.startToken + chunk.numTokens - rows] as const);
    this.deps.calibratedCosts?.observe(ran, computeS);
    this.deps.stepLog?.log({
      t: startS,
      wallS: durationS,
      computeS,
      sampleS,
      planned: plan.chunks.map((c) => [c.numTokens, c.contextTokens] as const),
      ran,
      restoredTokens: kv.stats.restoredTokens - restoredBefore,
    });
    this.stats.steps++;
    this.stats.stepWallS += durationS;
    this.stats.computeS += computeS;
    this.stats.sampleS += sampleS;
    return { durationS, sampled, recomputed, ...(failed.size > 0 ? { failed } : {}) };
  }

  /** One batch of these rows: computed, their slots extended, their samples and scores taken. */
  private async runRows(
    rows: readonly RowRange[],
    sampled: Map<string, SampledToken>,
    failed: Set<string>,
  ): Promise<{ computeS: number; sampleS: number }> {
    const { kv, runner } = this.deps;
    const batch = this.batch;
    batch.clear();
    for (const { chunk, slot, from, to } of rows) {
      const request = chunk.request;
      const content = request.content as TokenIdContent;
      const end = chunk.startToken + chunk.numTokens;
      // a prompt scored for its logprobs: each of its rows against the prompt's next token
      const scoreTop = this.deps.active.get(request.id)?.spec.sampling.promptLogprobs ?? null;
      for (let pos = from; pos < to; pos++) {
        const score =
          scoreTop !== null && pos + 1 < request.promptTokens
            ? { target: content.tokenAt(pos + 1), top: scoreTop }
            : null;
        batch.add(content.tokenAt(pos), pos, slot.seqId, chunk.samples && pos === end - 1, score);
      }
    }
    await kv.ensureFree(batch.length);
    const result = await runner.execute(batch);
    for (const { slot, from, to } of rows) kv.extend(slot, to - from);
    for (const out of result.outputs) this.onSample(out, sampled, failed);
    for (const score of result.scores ?? []) this.onScore(score);
    this.stats.batchedTokens += batch.length;
    this.stats.sampledTokens += result.outputs.length;
    return { computeS: result.computeS, sampleS: result.sampleS };
  }

  /**
   * Slots for newly admitted requests, their prefix materialised, their sampler set. Returns the admitted
   * requests that are to leave a checkpoint, and where.
   */
  private async admit(
    plan: StepPlan,
    recomputed: Map<string, number>,
    failed: Set<string>,
  ): Promise<Map<Request, number>> {
    const checkpoints = new Map<Request, number>();
    if (plan.admitted.length === 0) return checkpoints;
    const { kv, active: table } = this.deps;
    const startOf = new Map<Request, number>();
    for (const chunk of plan.chunks)
      if (!startOf.has(chunk.request)) startOf.set(chunk.request, chunk.startToken);
    for (const request of plan.admitted) {
      if (request.status !== "running") continue;
      const active = table.get(request.id);
      const { slot, recomputedTokens, checkpointAt } = await kv.admit(
        request,
        startOf.get(request) ?? request.numComputedTokens,
      );
      if (recomputedTokens > 0) recomputed.set(request.id, recomputedTokens);
      if (checkpointAt !== undefined) checkpoints.set(request, checkpointAt);
      if (!active || active.request !== request) continue;
      active.firstAdmittedS ??= request.admittedS;
      try {
        this.installSampler(slot.seqId, active, request);
      } catch (error) {
        failed.add(request.id);
        failActive(
          active,
          table,
          new EngineRejection(`sampling setup failed: ${(error as Error).message}`, "invalid_request"),
        );
      }
    }
    return checkpoints;
  }

  /**
   * Sets a slot's sampler for its request: its end-of-generation and stop tokens banned while fewer than
   * min_tokens are out, the next token of a spent thinking budget's close forced; the grammar and penalties
   * of a request with output (re-admitted after a preemption, its ban lifted) resume after that output.
   */
  private installSampler(seqId: number, active: ActiveRequest, request: Request): void {
    const { runner } = this.deps;
    const sampling = active.spec.sampling;
    const produced = active.content.length - request.promptTokens;
    const banned =
      produced < (sampling.minTokens ?? 0) ? [...runner.eogTokens(), ...(sampling.stopTokenIds ?? [])] : [];
    const prompt = () =>
      Int32Array.from({ length: request.promptTokens }, (_, pos) => active.content.tokenAt(pos));
    runner.setSampler(seqId, toRunnerSampling(sampling, prompt, banned, active.thinking?.forced ?? null));
    if (samplerFollowsOutput(sampling)) {
      for (let pos = request.promptTokens; pos < active.content.length; pos++) {
        runner.acceptToken(seqId, active.content.tokenAt(pos));
      }
    }
  }

  /** A scored prompt row: the prompt token after it, with its logprob, for the request's prompt logprobs. */
  private onScore(out: ScoredOutput): void {
    const request = this.deps.kv.slots[out.seqId]?.owner;
    const active = request ? this.deps.active.get(request.id) : undefined;
    if (!active?.promptLogprobs || active.request !== request) return;
    const entry = outputLogprob(this.deps.runner, out.token, out.logprobs);
    active.promptLogprobs[out.pos + 1] = { ...entry, token: out.token, rank: out.rank };
  }

  /**
   * A request's sampler set again mid-generation (min_tokens reached, a thinking budget's token forced);
   * one that cannot be set fails its request alone. Whether it was set.
   */
  private reinstallSampler(
    seqId: number,
    active: ActiveRequest,
    request: Request,
    failed: Set<string>,
  ): boolean {
    try {
      this.installSampler(seqId, active, request);
      return true;
    } catch (error) {
      failed.add(request.id);
      const rejection = new EngineRejection(
        `sampling setup failed: ${(error as Error).message}`,
        "invalid_request",
      );
      failActive(active, this.deps.active, rejection);
      return false;
    }
  }

  /** A sampled token of a slot: output text, stop checks, stream delta (with the tokens' logprobs it carries). */
  private onSample(out: SampledOutput, sampled: Map<string, SampledToken>, failed: Set<string>): void {
    const { seqId, token, isEog } = out;
    const { kv, runner, active: table } = this.deps;
    const request = kv.slots[seqId]?.owner;
    if (request?.status !== "running") return;
    const active = table.get(request.id);
    if (!active || active.request !== request || active.done) return;
    active.content.append(token);
    if (active.logprobs && out.logprobs) {
      active.logprobs.add(outputLogprob(runner, token, out.logprobs), active.output.text.length);
    }
    active.tokenIds?.add(token, active.output.text.length);
    const { ignoreEos, stopTokenIds, minTokens = 0 } = active.spec.sampling;
    const produced = active.content.length - request.promptTokens;
    if (produced === minTokens && minTokens > 0 && !this.reinstallSampler(seqId, active, request, failed))
      return;
    let delta: string;
    let stop: boolean;
    if (((isEog || runner.isEog(token)) && !ignoreEos) || stopTokenIds?.includes(token)) {
      delta = active.output.finish();
      stop = true;
    } else {
      const named = active.spec.sampling.skipSpecialTokens === false || active.preserved.has(token);
      const piece = named ? runner.templatePiece(token) : runner.tokenPiece(token);
      const pushed = active.output.push(piece, produced >= minTokens);
      delta = pushed.delta;
      stop = pushed.stopped;
    }
    // the scheduler counts this token in update(): is it the last the length limit allows?
    const lastToken = request.reachesLengthLimit(request.numOutputTokens + 1);
    if (
      !stop &&
      !lastToken &&
      active.thinking?.afterToken(active.output.text, produced, (text) =>
        runner.tokenizeContinuation(text),
      ) &&
      !this.reinstallSampler(seqId, active, request, failed)
    ) {
      return;
    }
    if (!stop && lastToken) delta += active.output.finish();
    pushDelta(active, delta, stop || lastToken);
    if (stop || lastToken) {
      sampled.set(
        request.id,
        active.readTool ? { stop, tool: active.readTool(active.output.text) } : { stop },
      );
    }
  }

  /**
   * A step that threw: every request of the plan fails (update() would otherwise count chunks that never
   * ran as computed), its KV is dropped (it may be half written); serving goes on.
   */
  private failStep(plan: StepPlan, error: unknown, failed: Set<string>): void {
    this.stats.failedSteps++;
    const { kv, active: table } = this.deps;
    const err = error instanceof Error ? error : new Error(String(error));
    const victims = new Set<Request>(plan.admitted);
    for (const chunk of plan.chunks) victims.add(chunk.request);
    for (const request of victims) {
      const slot = kv.slotOf(request);
      if (slot) kv.drop(slot);
      failed.add(request.id);
      const active = table.get(request.id);
      if (active && active.request === request) failActive(active, table, err);
    }
  }
}
