import type { Clock } from "../core/clock.js";
import type { CalibratedCostModel } from "../core/cost/calibrated-cost-model.js";
import type { TierName } from "../core/kv/offload-tiers.js";
import type { SeqOp } from "../core/kv/sequences/seq-ops.js";
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
import type { KvTierStore } from "./kv/kv-tier-store.js";
import {
  type ModelRunner,
  RunnerBatch,
  type RunnerSampling,
  type SampledLogprobs,
  type SampledOutput,
  type ScoredOutput,
} from "./runners/model-runner.js";
import type { StepLogFile } from "./step-log.js";

/** Counters of the engine's executor (for benchmarks and the TS overhead measurement). */
export interface EngineLoopStats {
  steps: number;
  /** rows sent to the runner: prefill and decode tokens */
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
  /** the bytes of the scheduler's tiers (null: no tier) */
  readonly tierStore: KvTierStore | null;
  /** a tier entry was brought back into a sequence in `seconds` (loading and restoring) */
  readonly onRestore?: (tier: TierName, tokens: number, seconds: number) => void;
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

/** Whether the runner's sampler keeps state from the output so far (a grammar's position, penalty counts). */
function samplerFollowsOutput(s: SamplingParams): boolean {
  return s.grammar !== null || penalized(s);
}

/**
 * The step loop's executor on llama.cpp: apply the plan's sequence ops (copies, cuts, saves and restores the
 * scheduler decided: core/kv/sequences/sequence-map.ts), then ONE batch of every chunk (decode tokens, prefill chunks)
 * into the sequence the plan names; sampled tokens are detokenized, checked against stop strings, EOS and
 * max tokens, and streamed. What went wrong is said in the StepResult (`failed`, `lostEntries`): the
 * scheduler changes only in its own update().
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
  /** ops handed over between plans (update()'s, an idle loop's), applied before the next plan's */
  private pending: SeqOp[] = [];
  /** this step's running requests by sequence id */
  private readonly bySeq = new Map<number, Request>();

  constructor(private readonly deps: LlamaExecutorDeps) {}

  applyKvChanges(changes: KvChanges): void {
    for (const op of changes.ops) this.pending.push(op);
  }

  /** Applies the ops handed over and not yet applied (shutdown: the last drops and saves). */
  async flush(ops: readonly SeqOp[] = []): Promise<void> {
    const all = [...this.pending, ...ops];
    this.pending = [];
    await this.applyOps(all, new Set(), new Set());
  }

  async execute(plan: StepPlan): Promise<StepResult> {
    const t0 = performance.now();
    const startS = this.deps.clock.nowS();
    let computeS = 0;
    let sampleS = 0;
    const sampled = new Map<string, SampledToken>();
    const failed = new Set<string>();
    const lostEntries = new Set<number>();
    const broken = new Set<number>();
    const ran: (readonly [number, number])[] = [];
    const ops = this.pending.length > 0 ? [...this.pending, ...plan.ops] : plan.ops;
    this.pending = [];
    let restoredTokens = 0;
    try {
      restoredTokens = await this.applyOps(ops, lostEntries, broken);
      this.bySeq.clear();
      for (const chunk of plan.chunks) {
        if (chunk.seq === null) throw new Error(`chunk of ${chunk.request.id} has no sequence`);
        this.bySeq.set(chunk.seq, chunk.request);
      }
      // a sequence whose saved state could not be read: its request is not run; the scheduler computes it afresh
      const runs = (c: ScheduledChunk) =>
        c.request.status === "running" && !failed.has(c.request.id) && !broken.has(c.seq as number);
      this.installSamplers(plan, runs, failed);
      const rows = plan.chunks.filter(runs);
      for (const chunk of rows) ran.push([chunk.numTokens, chunk.startToken]);
      if (rows.length > 0) ({ computeS, sampleS } = await this.runRows(rows, sampled, failed));
    } catch (error) {
      sampled.clear();
      this.failStep(plan, error, failed);
    }
    const durationS = (performance.now() - t0) / 1000;
    this.deps.calibratedCosts?.observe(ran, computeS);
    this.deps.stepLog?.log({
      t: startS,
      wallS: durationS,
      computeS,
      sampleS,
      planned: plan.chunks.map((c) => [c.numTokens, c.contextTokens] as const),
      ran,
      restoredTokens,
    });
    this.stats.steps++;
    this.stats.stepWallS += durationS;
    this.stats.computeS += computeS;
    this.stats.sampleS += sampleS;
    return {
      durationS,
      sampled,
      ...(failed.size > 0 ? { failed } : {}),
      ...(lostEntries.size > 0 ? { lostEntries } : {}),
    };
  }

  /**
   * Carries out sequence ops in order. A tier entry that cannot be written or read is reported lost (a
   * sequence it was to fill is emptied and `broken`); any other op failing throws (the step fails). Returns
   * the tokens restored from the tiers.
   */
  private async applyOps(ops: readonly SeqOp[], lost: Set<number>, broken: Set<number>): Promise<number> {
    const { runner, tierStore } = this.deps;
    let restored = 0;
    for (const op of ops) {
      switch (op.op) {
        case "assign":
          break;
        case "copy":
          if (op.mode === "share") runner.copySeq(op.from, op.to, op.tokens);
          else await this.copyData(op.from, op.to, op.tokens);
          break;
        case "truncate":
          runner.removeSeq(op.seq, op.tokens, -1);
          break;
        case "drop":
          runner.removeSeq(op.seq, 0, -1);
          break;
        case "reset":
          runner.clearPool();
          break;
        case "save":
          try {
            await this.store().save(op.entry, op.tier, (take) => runner.saveSeq(op.seq, take));
          } catch {
            // a tier that cannot take it (disk error) only costs a recompute later
            lost.add(op.entry);
          }
          break;
        case "restore": {
          const t0 = performance.now();
          const tier = this.store().tierOf(op.entry);
          try {
            const state = await this.store().load(op.entry);
            await runner.restoreSeq(op.seq, state);
          } catch {
            runner.removeSeq(op.seq, 0, -1);
            lost.add(op.entry);
            broken.add(op.seq);
            break;
          }
          runner.removeSeq(op.seq, op.tokens, -1);
          const shared = op.shareFrom?.tokens ?? 0;
          if (op.shareFrom && shared > 0) {
            runner.removeSeq(op.seq, 0, shared);
            runner.copySeq(op.shareFrom.seq, op.seq, shared);
          }
          if (tier) this.deps.onRestore?.(tier, op.tokens, (performance.now() - t0) / 1000);
          restored += op.tokens - shared;
          break;
        }
        case "demote":
          try {
            await this.store().demote(op.entry);
          } catch {
            lost.add(op.entry);
          }
          break;
        case "forget":
          await tierStore?.forget(op.entry);
          break;
      }
    }
    return restored;
  }

  /** `to` (empty) takes a copy of the data of `from`'s first `tokens` positions: its saved state, cut. */
  private async copyData(from: number, to: number, tokens: number): Promise<void> {
    const { runner, tierStore } = this.deps;
    const buffers = tierStore?.buffers ?? null;
    const state = await runner.saveSeq(from, buffers ? (n) => buffers.take(n) : undefined);
    try {
      await runner.restoreSeq(to, state);
    } finally {
      buffers?.give(state);
    }
    runner.removeSeq(to, tokens, -1);
  }

  private store(): KvTierStore {
    const store = this.deps.tierStore;
    if (!store) throw new Error("a tier op without a tier store");
    return store;
  }

  /** One batch of these chunks: computed into their sequences, their samples and scores taken. */
  private async runRows(
    chunks: readonly ScheduledChunk[],
    sampled: Map<string, SampledToken>,
    failed: Set<string>,
  ): Promise<{ computeS: number; sampleS: number }> {
    const { runner } = this.deps;
    const batch = this.batch;
    batch.clear();
    for (const chunk of chunks) {
      const request = chunk.request;
      const content = request.content as TokenIdContent;
      const end = chunk.startToken + chunk.numTokens;
      const seq = chunk.seq as number;
      // a prompt scored for its logprobs: each of its rows against the prompt's next token
      const scoreTop = this.deps.active.get(request.id)?.spec.sampling.promptLogprobs ?? null;
      for (let pos = chunk.startToken; pos < end; pos++) {
        const score =
          scoreTop !== null && pos + 1 < request.promptTokens
            ? { target: content.tokenAt(pos + 1), top: scoreTop }
            : null;
        batch.add(content.tokenAt(pos), pos, seq, chunk.samples && pos === end - 1, score);
      }
    }
    const result = await runner.execute(batch);
    for (const out of result.outputs) this.onSample(out, sampled, failed);
    for (const score of result.scores ?? []) this.onScore(score);
    this.stats.batchedTokens += batch.length;
    this.stats.sampledTokens += result.outputs.length;
    return { computeS: result.computeS, sampleS: result.sampleS };
  }

  /** Samplers of the newly admitted requests, set on their sequences. */
  private installSamplers(
    plan: StepPlan,
    runs: (chunk: ScheduledChunk) => boolean,
    failed: Set<string>,
  ): void {
    const table = this.deps.active;
    for (const chunk of plan.chunks) {
      const request = chunk.request;
      if (!plan.admitted.includes(request) || !runs(chunk)) continue;
      const active = table.get(request.id);
      if (!active || active.request !== request) continue;
      active.firstAdmittedS ??= request.admittedS;
      try {
        this.installSampler(chunk.seq as number, active, request);
      } catch (error) {
        failed.add(request.id);
        failActive(
          active,
          table,
          new EngineRejection(`sampling setup failed: ${(error as Error).message}`, "invalid_request"),
        );
      }
    }
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
    const request = this.bySeq.get(out.seqId);
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
    const { runner, active: table } = this.deps;
    const request = this.bySeq.get(seqId);
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
   * ran as computed; it drops their sequences, which may be half written); serving goes on.
   */
  private failStep(plan: StepPlan, error: unknown, failed: Set<string>): void {
    this.stats.failedSteps++;
    const { active: table } = this.deps;
    const err = error instanceof Error ? error : new Error(String(error));
    const victims = new Set<Request>(plan.admitted);
    for (const chunk of plan.chunks) victims.add(chunk.request);
    for (const request of victims) {
      failed.add(request.id);
      const active = table.get(request.id);
      if (active && active.request === request) failActive(active, table, err);
    }
  }
}
