import { availableParallelism } from "node:os";
import { basename } from "node:path";
import { renderChatML } from "../../gguf/index.js";
import type { ModelChatTemplate, RenderChatOptions } from "../engine-api.js";
import { type DeviceInfo, deviceInfoOf } from "../gpu/device-info.js";
import {
  allocPinnedBuffer,
  DecodeBatch,
  devices,
  isLlamaError,
  type KvCacheType,
  type LlamaContext,
  type LlamaModel,
  loadModel,
} from "../native/llama-native.js";
import type {
  ChatMessageIn,
  ExecuteResult,
  KvLayout,
  ModelRunner,
  RunnerBatch,
  RunnerSampling,
  SampledOutput,
  ScoredOutput,
} from "./model-runner.js";

/** What sizes a model's KV pool: its training context and the bytes one token's K and V take in f16. */
export interface ModelKvShape {
  /** 0 when the model does not say */
  readonly contextTokens: number;
  /** 0 when unknown (recurrent models) */
  readonly kvBytesPerToken: number;
}

export interface LlamaRunnerOptions {
  /** GGUF file */
  readonly modelPath: string;
  /** name reported as the model id (default: general.name from the file, else the file name) */
  readonly modelId?: string;
  /** KV cells over every slot (unified: llama.cpp rounds up to a multiple of 256; streams: each stream is
   * rounded down to one, at least 256), or the cells for the model once it is loaded */
  readonly kvCells: number | ((model: ModelKvShape) => number);
  /** sequence slots, up to 256 */
  readonly maxSeqs: number;
  /** one unified pool (default) or one stream of kvCells / maxSeqs cells per slot */
  readonly kvLayout?: KvLayout;
  /** rows per llama_decode call (default 512); larger batches are split */
  readonly batchTokens?: number;
  /**
   * rows per llama.cpp micro-batch, at most batchTokens (default 2048 with the KV cache on a GPU, 512 on
   * the CPU): the unit of each matrix product and of the attention mask llama.cpp builds on the host
   */
  readonly ubatchTokens?: number;
  /** threads for decode steps (default: cores - 1, at least 1) */
  readonly threads?: number;
  /** threads for prompt batches (default: threads) */
  readonly threadsBatch?: number;
  /** flash attention (default true: masked cells of idle sequences cost little on CPU) */
  readonly flashAttn?: boolean;
  /** K and V cache type (default f16) */
  readonly kvCacheType?: KvCacheType;
  /** layers on a GPU, when one is loaded (default "auto") */
  readonly gpuLayers?: number | "all" | "auto";
}

/**
 * Rows llama.cpp computes at once. On a GPU, matrix products over 2048 rows use the tensor cores far better
 * than over 512; on the CPU, 512 keeps the compute buffer small at no cost in speed.
 */
const GPU_MAX_UBATCH = 2048;
const CPU_MAX_UBATCH = 512;

/**
 * Why a model with recurrent (state-space) layers is not served: such a layer keeps one state per sequence,
 * the sum of everything before it, which can be neither shared with another sequence by prefix nor cut back
 * to a shorter prefix, and the engine's KV reuse does both (llama.cpp refuses the decode that follows).
 */
function recurrentRefusal(path: string, model: LlamaModel): string {
  const arch = model.meta("general.architecture") ?? "unknown";
  const kind = model.info.isHybrid ? "a hybrid (attention + recurrent)" : "a recurrent";
  return (
    `${basename(path)} is ${kind} model (architecture ${arch}): its recurrent layers keep one state per ` +
    "sequence, which cannot be shared by prefix or cut back to one, as Continuum's KV reuse needs. Serve " +
    "an attention-only model (Llama, Qwen 2/3, Gemma, Mistral, gpt-oss, ...), or this one with llama-server."
  );
}

/** Default thread count: leave one core to Node's own event loop. */
export function defaultThreads(): number {
  return Math.max(1, availableParallelism() - 1);
}

function specialTokenText(model: LlamaModel, token: number | null): string {
  return token === null ? "" : Buffer.from(model.tokenToPiece(token, { special: true })).toString("utf8");
}

function modelChatTemplate(model: LlamaModel): ModelChatTemplate {
  const source = model.info.chatTemplate;
  const toolUse = model.info.chatTemplateToolUse;
  return {
    source: source === "" ? null : source,
    toolUseSource: toolUse === "" ? null : toolUse,
    bosToken: specialTokenText(model, model.info.bos),
    eosToken: specialTokenText(model, model.info.eos),
    eosTokenId: model.info.eos,
    addsBos: model.info.addBos,
  };
}

/**
 * ModelRunner over our llama.cpp addon: ONE context whose KV cells — a unified pool, or one stream per slot —
 * serve `maxSeqs` sequence slots, per-slot native samplers, and mixed decode batches of many sequences.
 */
export class LlamaModelRunner implements ModelRunner {
  readonly modelId: string;
  readonly kvCells: number;
  readonly kvLayout: KvLayout;
  readonly maxSeqs: number;
  readonly maxContextTokens: number;
  readonly kvBytesPerToken: number;
  readonly slidingWindow: number;
  readonly weightBytes: number;
  readonly vocabSize: number;
  readonly chatTemplate: ModelChatTemplate;
  /** native decode calls and their summed time, for overhead measurements */
  decodeCalls = 0;
  private readonly decodeBatch: DecodeBatch;
  private readonly pieces: (Uint8Array | undefined)[];
  private readonly templatePieces: (Uint8Array | undefined)[];
  /** the vocabulary's end-of-generation tokens, found on first use */
  private eog: number[] | null = null;
  private closed = false;
  /** Moving average of a decode step's compute per row (ms); unknown until the first decode step. */
  private decodeRowMs = Number.POSITIVE_INFINITY;

  private constructor(
    readonly model: LlamaModel,
    readonly context: LlamaContext,
    modelId: string,
    readonly device: DeviceInfo,
  ) {
    const info = context.info;
    this.modelId = modelId;
    this.kvLayout = info.kvUnified ? "unified" : "streams";
    this.maxSeqs = info.nSeqMax;
    this.kvCells = info.kvUnified ? info.nCtx : info.nCtxSeq * info.nSeqMax;
    this.maxContextTokens = Math.min(
      model.info.nCtxTrain > 0 ? model.info.nCtxTrain : info.nCtxSeq,
      info.nCtxSeq,
    );
    this.kvBytesPerToken = info.kvBytesPerToken ?? model.info.kvBytesPerTokenF16 ?? 0;
    this.slidingWindow = model.info.nSwa;
    this.weightBytes = model.info.sizeBytes;
    this.decodeBatch = new DecodeBatch(info.nBatch);
    this.vocabSize = model.info.nVocab;
    this.pieces = new Array(model.info.nVocab);
    this.templatePieces = new Array(model.info.nVocab);
    this.chatTemplate = modelChatTemplate(model);
  }

  static async open(options: LlamaRunnerOptions): Promise<LlamaModelRunner> {
    const model = await loadModel(options.modelPath, { gpuLayers: options.gpuLayers ?? "auto" });
    try {
      if (model.info.isRecurrent || model.info.isHybrid)
        throw new Error(recurrentRefusal(options.modelPath, model));
      const batchTokens = options.batchTokens ?? 512;
      const device = deviceInfoOf(devices(), model.info.nLayer, model.gpuLayers);
      const kvOnGpu = device.kvCache !== "cpu";
      const threads = options.threads ?? defaultThreads();
      const streams = options.kvLayout === "streams";
      // llama.cpp rounds each stream up to a multiple of 256 cells: round down instead, so that the streams
      // never take more memory than was asked for
      const kvCells =
        typeof options.kvCells === "number"
          ? options.kvCells
          : options.kvCells({
              contextTokens: model.info.nCtxTrain,
              kvBytesPerToken: model.info.kvBytesPerTokenF16 ?? 0,
            });
      const streamCells = Math.max(256, Math.floor(kvCells / options.maxSeqs / 256) * 256);
      const context = await model.createContext({
        nCtx: streams ? streamCells * options.maxSeqs : kvCells,
        nSeqMax: options.maxSeqs,
        nBatch: batchTokens,
        nUBatch: Math.min(batchTokens, options.ubatchTokens ?? (kvOnGpu ? GPU_MAX_UBATCH : CPU_MAX_UBATCH)),
        threads,
        threadsBatch: options.threadsBatch ?? threads,
        flashAttn: options.flashAttn ?? true,
        kvUnified: !streams,
        ...(options.kvCacheType ? { typeK: options.kvCacheType, typeV: options.kvCacheType } : {}),
      });
      const name = options.modelId ?? model.meta("general.name") ?? basename(options.modelPath, ".gguf");
      return new LlamaModelRunner(model, context, name, device);
    } catch (error) {
      model.free();
      throw error;
    }
  }

  tokenize(text: string): Int32Array {
    return this.model.tokenize(text, { addSpecial: true, parseSpecial: true });
  }

  tokenizeAsync(text: string, options: { readonly addSpecial?: boolean } = {}): Promise<Int32Array> {
    return this.model.tokenizeAsync(text, { addSpecial: options.addSpecial ?? true, parseSpecial: true });
  }

  tokenPiece(token: number): Uint8Array {
    return this.cachedPiece(this.pieces, token, false);
  }

  tokenizeContinuation(text: string): Int32Array {
    return this.model.tokenize(text, { addSpecial: false, parseSpecial: true });
  }

  templatePiece(token: number): Uint8Array {
    return this.cachedPiece(this.templatePieces, token, true);
  }

  detokenize(tokens: Int32Array): string {
    return this.model.detokenize(tokens, { removeSpecial: false, unparseSpecial: true });
  }

  private cachedPiece(cache: (Uint8Array | undefined)[], token: number, special: boolean): Uint8Array {
    let piece = cache[token];
    if (piece === undefined) {
      piece = this.model.tokenToPiece(token, { special });
      cache[token] = piece;
    }
    return piece;
  }

  isEog(token: number): boolean {
    return this.model.isEog(token);
  }

  eogTokens(): readonly number[] {
    if (this.eog === null) {
      this.eog = [];
      for (let token = 0; token < this.vocabSize; token++) if (this.model.isEog(token)) this.eog.push(token);
    }
    return this.eog;
  }

  renderChat(messages: readonly ChatMessageIn[], options: RenderChatOptions = {}): string {
    const list = messages.map((m) => ({ role: m.role, content: m.content }));
    const addAssistant = options.addGenerationPrompt ?? true;
    try {
      return this.model.applyChatTemplate(list, { addAssistant });
    } catch (error) {
      if (isLlamaError(error, "LLAMA_NO_CHAT_TEMPLATE")) return renderChatML(list, addAssistant);
      throw error;
    }
  }

  setSampler(seqId: number, sampling: RunnerSampling | null): void {
    if (sampling === null) {
      this.context.setSampler(seqId, null);
      return;
    }
    this.context.setSampler(seqId, {
      temperature: sampling.temperature,
      topK: sampling.topK,
      topP: sampling.topP,
      minP: sampling.minP,
      ...(sampling.seed === null ? {} : { seed: sampling.seed >>> 0 }),
      ...(sampling.grammar === null ? {} : { grammar: sampling.grammar }),
      ...(sampling.logitBias.length === 0 ? {} : { logitBias: sampling.logitBias }),
      ...(sampling.presencePenalty === 0 ? {} : { presencePenalty: sampling.presencePenalty }),
      ...(sampling.frequencyPenalty === 0 ? {} : { frequencyPenalty: sampling.frequencyPenalty }),
      ...(sampling.repetitionPenalty === 1 ? {} : { repetitionPenalty: sampling.repetitionPenalty }),
      ...(sampling.promptTokens === null ? {} : { promptTokens: sampling.promptTokens }),
      ...(sampling.logprobs === null ? {} : { logprobs: sampling.logprobs }),
    });
  }

  acceptToken(seqId: number, token: number): void {
    this.context.acceptToken(seqId, token);
  }

  async execute(batch: RunnerBatch): Promise<ExecuteResult> {
    const n = batch.length;
    const db = this.decodeBatch;
    const cap = db.capacity;
    const outputs: SampledOutput[] = [];
    const scores: ScoredOutput[] = [];
    let computeMs = 0;
    let sampleMs = 0;
    for (let start = 0; start < n; start += cap) {
      const end = Math.min(n, start + cap);
      db.clear();
      for (let i = start; i < end; i++) {
        db.add(
          batch.tokens[i] as number,
          batch.pos[i] as number,
          batch.seqIds[i] as number,
          batch.sample[i] === 1,
          batch.scoreOf(i),
        );
      }
      const oneTokenPerSeq = isDecodeStep(batch.seqIds, start, end);
      const rows = end - start;
      const r =
        oneTokenPerSeq && rows * this.decodeRowMs <= SYNC_DECODE_MAX_MS
          ? this.context.decodeSync(db, { sample: true })
          : await this.context.decode(db, { sample: true });
      this.decodeCalls++;
      computeMs += r.decodeMs + r.sampleMs;
      sampleMs += r.sampleMs;
      if (oneTokenPerSeq) {
        const rowMs = (r.decodeMs + r.sampleMs) / rows;
        this.decodeRowMs = Number.isFinite(this.decodeRowMs) ? 0.8 * this.decodeRowMs + 0.2 * rowMs : rowMs;
      }
      for (const o of r.outputs) {
        if (o.scored) {
          const pos = batch.pos[start + o.batchIndex] as number;
          scores.push({ seqId: o.seqId, pos, token: o.token, logprobs: o.logprobs!, rank: o.rank! });
          continue;
        }
        outputs.push({
          seqId: o.seqId,
          token: o.token,
          isEog: o.isEog,
          ...(o.logprobs ? { logprobs: o.logprobs } : {}),
        });
      }
    }
    return {
      outputs,
      ...(scores.length > 0 ? { scores } : {}),
      computeS: computeMs / 1000,
      sampleS: sampleMs / 1000,
    };
  }

  removeSeq(seqId: number, p0 = 0, p1 = -1): void {
    this.context.seqRemove(seqId, p0, p1);
  }

  copySeq(srcSeqId: number, dstSeqId: number, nTokens: number): void {
    // llama.cpp copies between streams only whole, and asserts (aborting the process) otherwise
    if (this.kvLayout !== "unified") throw new Error("copySeq needs the unified KV layout");
    this.context.seqCopy(srcSeqId, dstSeqId, 0, nTokens);
  }

  /**
   * Page-locked memory when the KV lives on a GPU: the GPU copies it by DMA at PCIe speed, where ordinary
   * memory goes through a small staging buffer at a tenth of that (4-5 GB/s on an H100 box).
   */
  allocateStateBuffer(bytes: number): Buffer {
    return (this.device.kvCache !== "cpu" ? allocPinnedBuffer(bytes) : null) ?? Buffer.allocUnsafeSlow(bytes);
  }

  saveSeq(seqId: number, take?: (bytes: number) => Buffer): Promise<Buffer> {
    return take ? this.context.saveSeqStateInto(seqId, take) : this.context.saveSeqState(seqId);
  }

  clearPool(): void {
    // metadata only: emptied cells are masked out of attention, and zeroing the buffers cost ~5 ms per call
    this.context.clear(false);
  }

  async restoreSeq(seqId: number, state: Buffer): Promise<number> {
    await this.context.restoreSeqState(seqId, state);
    return this.context.seqPosMax(seqId) + 1;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.context.free();
    this.model.free();
  }
}

/**
 * A decode step (one token per sequence) expected to take at most this much compute runs on the JS
 * thread: no worker -> Promise hop, and the same graph measured faster there (`npm run bench:engine`,
 * sync columns). Longer steps, prefill and any step of a large model stay on the worker, so the event
 * loop (health checks, streaming) is never held longer than this.
 */
const SYNC_DECODE_MAX_MS = 30;

function isDecodeStep(seqIds: ArrayLike<number>, start: number, end: number): boolean {
  const seen = new Set<number>();
  for (let i = start; i < end; i++) {
    const seq = seqIds[i] as number;
    if (seen.has(seq)) return false;
    seen.add(seq);
  }
  return true;
}
