/**
 * A scripted EngineService for the server's tests: the reply to each request comes from `reply`,
 * streamed in pieces with an optional delay, and every request, abort and shutdown is recorded.
 * Tokens are whitespace-separated words, and a program's cached tokens are the prompt words it
 * shares with its previous turn (prompt + output). tokenize() numbers each word (with the whitespace
 * around it) as it first sees it, so detokenize() gives the text back.
 */
import type { SchedulerSnapshot } from "../../core/scheduler-snapshot.js";
import {
  type ChatTurn,
  type EngineMetrics,
  EngineRejection,
  type EngineService,
  type GenerateEvent,
  type GenerateRequest,
  type ModelChatTemplate,
  NO_CHAT_TEMPLATE,
  type ProgramKv,
  type RenderChatOptions,
} from "../../engine/engine-api.js";
import { cpuDeviceInfo, type DeviceInfo } from "../../engine/gpu/device-info.js";

export interface FakeEngineOptions {
  /** the output for a request, as one string or its streamed pieces (default "Hello there!") */
  readonly reply?: (request: GenerateRequest) => string | readonly string[];
  /** ms between pieces (default 0) */
  readonly delayMs?: number;
  readonly maxContextTokens?: number;
  /** refuse a request before its first event */
  readonly reject?: (request: GenerateRequest) => EngineRejection | null;
  readonly metrics?: Partial<EngineMetrics>;
  /** the model's chat template as a real model's engine reports it (default: none) */
  readonly chatTemplate?: ModelChatTemplate;
  /** where the model runs (default: this machine's CPU) */
  readonly device?: DeviceInfo;
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w.length > 0);
}

/** The text's words, each with the whitespace before it, the last with the whitespace after it too. */
function wordPieces(text: string): string[] {
  const pieces = text.match(/\s*\S+/g) ?? [];
  if (pieces.length > 0) pieces[pieces.length - 1] += text.slice(pieces.join("").length);
  return pieces;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

export class FakeEngine implements EngineService {
  readonly modelId = "fake-model";
  readonly maxContextTokens: number;
  readonly vocabSize = 32000;
  readonly kvSummary = "fake KV";
  readonly device: DeviceInfo;
  readonly chatTemplate: ModelChatTemplate;
  readonly requests: GenerateRequest[] = [];
  readonly aborted: string[] = [];
  readonly finished: string[] = [];
  /** programs ended by endProgram(), in order */
  readonly endedPrograms: string[] = [];
  /** programs whose last turn came (`isLastStep`) and finished, as the real engine ends them */
  private readonly lastStepped = new Set<string>();
  /** [program, request] pairs markSideRequest() named, in order */
  readonly sideRequests: [string, string][] = [];
  shutdownCalls = 0;
  private running = 0;
  private readonly lastContext = new Map<string, string[]>();
  /** the word pieces tokenize() has seen, by token id */
  private readonly vocabulary: string[] = [];
  /** performance.now() of each program's first request, for its JCT when its last step finishes */
  private readonly programStartMs = new Map<string, number>();

  constructor(private readonly options: FakeEngineOptions = {}) {
    this.maxContextTokens = options.maxContextTokens ?? 4096;
    this.chatTemplate = options.chatTemplate ?? NO_CHAT_TEMPLATE;
    this.device = options.device ?? cpuDeviceInfo();
  }

  renderChat(messages: readonly ChatTurn[], options: RenderChatOptions = {}): string {
    const turns = messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("");
    return options.addGenerationPrompt === false ? turns : `${turns}<|im_start|>assistant\n`;
  }

  async tokenize(text: string): Promise<number[]> {
    return wordPieces(text).map((piece) => {
      const known = this.vocabulary.indexOf(piece);
      return known >= 0 ? known : this.vocabulary.push(piece) - 1;
    });
  }

  /** A word piece tokenize() has seen; an id it has not handed out yet is empty. */
  tokenPieces(ids: readonly number[]): Uint8Array[] {
    return ids.map((id) => {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new EngineRejection(`token id ${id} is not in the vocabulary`, "invalid_request");
      }
      return Buffer.from(this.vocabulary[id] ?? "", "utf8");
    });
  }

  detokenize(ids: readonly number[]): string {
    return Buffer.concat(this.tokenPieces(ids)).toString("utf8");
  }

  private programJctS(request: GenerateRequest, reason: string, nowMs: number): number | null {
    const startMs = request.programId === null ? undefined : this.programStartMs.get(request.programId);
    if (!request.isLastStep || reason === "abort" || startMs === undefined) return null;
    return (nowMs - startMs) / 1000;
  }

  countTokens(text: string): number {
    return words(text).length;
  }

  async countPromptTokens(text: string): Promise<number> {
    return this.countTokens(text);
  }

  /** Resolves once `count` requests have arrived. */
  async waitForRequests(count: number): Promise<void> {
    while (this.requests.length < count) await new Promise((r) => setTimeout(r, 5));
  }

  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const rejection = this.options.reject?.(request) ?? null;
    if (rejection) throw rejection;
    const known = request.programId !== null && this.requests.some((r) => r.programId === request.programId);
    if (this.drainingPrograms && !known) throw new EngineRejection("draining", "draining");
    this.requests.push(request);
    if (request.programId !== null) this.lastStepped.delete(request.programId);
    return this.run(request, signal);
  }

  private async *run(request: GenerateRequest, signal: AbortSignal): AsyncGenerator<GenerateEvent> {
    const started = performance.now();
    if (request.programId !== null && !this.programStartMs.has(request.programId)) {
      this.programStartMs.set(request.programId, started);
    }
    this.running++;
    try {
      const reply = this.options.reply?.(request) ?? "Hello there!";
      const pieces = typeof reply === "string" ? [reply] : reply;
      const promptWords = request.promptTokenIds?.map(String) ?? words(request.prompt);
      const previous = request.programId ? (this.lastContext.get(request.programId) ?? []) : [];
      let cached = 0;
      while (
        cached < previous.length &&
        cached < promptWords.length &&
        previous[cached] === promptWords[cached]
      ) {
        cached++;
      }
      let text = "";
      let firstTokenAt: number | null = null;
      let finishReason: "stop" | "length" | "abort" = "stop";
      let stopSequence: string | null = null;
      for (const [i, piece] of pieces.entries()) {
        // max_tokens counts words here; the reply is cut after the piece that reaches it
        if (i > 0 && words(text).length >= request.sampling.maxTokens) {
          finishReason = "length";
          break;
        }
        if (this.options.delayMs) await sleep(this.options.delayMs, signal);
        if (i === 0 && !signal.aborted) {
          // as the real engine, once the request's first step ran
          const promptUsage = { promptTokens: promptWords.length, cachedTokens: cached };
          yield { type: "delta", text: "", promptUsage };
        }
        if (signal.aborted) {
          finishReason = "abort";
          this.aborted.push(request.requestId);
          break;
        }
        firstTokenAt ??= performance.now();
        const stop = request.sampling.stop.find((s) => (text + piece).includes(s));
        if (stop !== undefined) {
          const kept = (text + piece).slice(0, (text + piece).indexOf(stop)).slice(text.length);
          text += kept;
          if (kept.length > 0) yield { type: "delta", text: kept };
          stopSequence = stop;
          break;
        }
        text += piece;
        yield { type: "delta", text: piece };
      }
      const completionTokens = words(text).length;
      if (request.programId) this.lastContext.set(request.programId, [...promptWords, ...words(text)]);
      this.finished.push(request.requestId);
      if (request.isLastStep && request.programId !== null) this.lastStepped.add(request.programId);
      const now = performance.now();
      yield {
        type: "done",
        finishReason,
        text,
        stopSequence,
        usage: { promptTokens: promptWords.length, completionTokens, cachedTokens: cached },
        queueS: 0,
        ttftS: firstTokenAt === null ? null : (firstTokenAt - started) / 1000,
        e2eS: (now - started) / 1000,
        programJctS: this.programJctS(request, finishReason, now),
      };
    } finally {
      this.running--;
    }
  }

  drainingPrograms = false;

  drainPrograms(): void {
    this.drainingPrograms = true;
  }

  markSideRequest(programId: string, requestId: string): void {
    this.sideRequests.push([programId, requestId]);
  }

  endProgram(programId: string): boolean {
    if (!this.requests.some((r) => r.programId === programId) || this.endedPrograms.includes(programId)) {
      return false;
    }
    this.endedPrograms.push(programId);
    return true;
  }

  metrics(): EngineMetrics {
    return {
      running: this.running,
      waiting: 0,
      longestWaitS: 0,
      pinnedPrograms: 0,
      kvUsage: 0,
      kvBlockSizeTokens: 16,
      kvBlocks: 1024,
      prefixQueryTokens: 0,
      prefixHitTokens: 0,
      generatedTokens: 0,
      preemptions: 0,
      pinsCreated: 0,
      pinsExpired: 0,
      pinsSacrificed: 0,
      modelComputeS: 0,
      samplingS: 0,
      prefill1kTokensS: 0.2,
      ramReload1kTokensS: 0.001,
      memory: { modelBytes: 0, kvPoolBytes: 0, ramTierBytes: 0, stateBufferBytes: 0, programs: 0 },
      ...this.options.metrics,
    };
  }

  /** One block per running request, every program seen between turns. */
  snapshot(): SchedulerSnapshot {
    return {
      timeS: performance.now() / 1000,
      pool: {
        blockSizeTokens: 16,
        totalBlocks: 1024,
        runningBlocks: this.running,
        pinnedBlocks: 0,
        cachedBlocks: 0,
        freeBlocks: 1024 - this.running,
      },
      tiers: [],
      numRunning: this.running,
      numWaiting: 0,
      numPrograms: this.lastContext.size,
      programs: [...this.lastContext].map(([id, context]) => ({
        id,
        state: "tool" as const,
        pinTtlLeftS: null,
        contextTokens: context.length,
        turns: 1,
        ageS: 0,
        cachedShare: null,
      })),
      departed: [],
    };
  }

  /** A program's last context stays reusable in the pool (its next turn's cached words). */
  kvByProgram(): ReadonlyMap<string, ProgramKv> {
    return new Map(
      [...this.lastContext].map(([id, context]) => [
        id,
        { poolTokens: context.length, poolHolder: "reusable", tier: null, tierTokens: 0, tierBytes: 0 },
      ]),
    );
  }

  async shutdown(): Promise<void> {
    this.shutdownCalls++;
  }
}

export { EngineRejection };
