/**
 * The executor interface the engine drives: a model with ONE pool of KV cells shared by numbered sequence
 * slots (llama.cpp's unified KV cache), a tokenizer, per-slot samplers, and batched decoding of many
 * sequences at once. Two implementations: LlamaModelRunner (our llama.cpp addon) and FakeModelRunner
 * (deterministic, pure TypeScript, for tests).
 *
 * Semantics every runner keeps (they are llama.cpp's):
 * - A slot holds the KV of positions 0..n-1 of one sequence; a decode row for that slot must continue at
 *   position n (rows of one slot are consecutive and in order).
 * - copySeq(src, dst, n) makes dst share src's cells for positions [0, n): no new cells are used.
 * - A cell is freed when no slot holds it any more (removeSeq).
 * - execute() fails with an error whose `code` is "LLAMA_DECODE_NO_KV_SLOT" when the pool has fewer free
 *   cells than rows, and then changes nothing. The scheduler's placement (core/kv/sequences/sequence-map.ts) rules it out.
 */

import type { KvLayout } from "../../core/kv/kv-spec.js";
import type { ModelChatTemplate, RenderChatOptions, TokenBias } from "../engine-api.js";
import type { DeviceInfo } from "../gpu/device-info.js";

export interface RunnerSampling {
  /** <= 0: greedy */
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly minP: number;
  /** null: a random seed */
  readonly seed: number | null;
  /** GBNF grammar constraining the output */
  readonly grammar: string | null;
  /** added to those tokens' logits (empty: none) */
  readonly logitBias: readonly TokenBias[];
  /** subtracted from the logit of a token already taken, once / per time taken (0: none) */
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  /** a logit of a token in the prompt or taken, divided by it where positive, multiplied where not (1: off) */
  readonly repetitionPenalty: number;
  /** the prompt's tokens, where the repetition penalty counts them (null: it is off) */
  readonly promptTokens: Int32Array | null;
  /** each sampled token's log-probability with this many most likely alternatives (null: none) */
  readonly logprobs: number | null;
}

export interface ChatMessageIn {
  readonly role: string;
  readonly content: string;
}

/** One sampled token: the row of `seqId` that asked for a sample. */
export interface SampledOutput {
  readonly seqId: number;
  readonly token: number;
  /** the token ends generation (EOS, EOT, ...) */
  readonly isEog: boolean;
  /** when the slot's sampler asked for them: the token's and the most likely tokens' log-probabilities */
  readonly logprobs?: SampledLogprobs;
}

/** Log-probabilities under the model's raw distribution at one position. */
export interface SampledLogprobs {
  readonly logprob: number;
  /** highest first */
  readonly top: readonly { readonly token: number; readonly logprob: number }[];
}

/** A scored row's result: the log-probability of the prompt's token after position `pos`, `token`. */
export interface ScoredOutput {
  readonly seqId: number;
  readonly pos: number;
  readonly token: number;
  readonly logprobs: SampledLogprobs;
  /** the token's rank at that position (1: the most likely) */
  readonly rank: number;
}

export interface ExecuteResult {
  readonly outputs: readonly SampledOutput[];
  /** the batch's scored rows (RunnerBatch.add's `score`), when it had any */
  readonly scores?: readonly ScoredOutput[];
  /** time spent in the model itself (native decode + sampling), seconds */
  readonly computeS: number;
  /** of computeS, the host's sampling after the decode, seconds */
  readonly sampleS: number;
}

/**
 * A growable batch of (token, position, slot, sample?) rows over any number of slots. A scored row (a prompt
 * row of a request that asked for its prompt's logprobs) is not sampled: it reports the log-probability of
 * `scoreTargets[i]`, the prompt's next token, and `scoreTop[i]` alternatives.
 */
export class RunnerBatch {
  tokens: Int32Array;
  pos: Int32Array;
  seqIds: Int32Array;
  sample: Uint8Array;
  scoreTargets: Int32Array;
  scoreTop: Int32Array;
  private n = 0;

  constructor(capacity = 256) {
    this.tokens = new Int32Array(capacity);
    this.pos = new Int32Array(capacity);
    this.seqIds = new Int32Array(capacity);
    this.sample = new Uint8Array(capacity);
    this.scoreTargets = new Int32Array(capacity);
    this.scoreTop = new Int32Array(capacity);
  }

  get length(): number {
    return this.n;
  }

  clear(): void {
    this.n = 0;
  }

  add(
    token: number,
    pos: number,
    seqId: number,
    sample: boolean,
    score: { target: number; top: number } | null = null,
  ): void {
    if (this.n === this.tokens.length) this.grow();
    const i = this.n++;
    this.tokens[i] = token;
    this.pos[i] = pos;
    this.seqIds[i] = seqId;
    this.sample[i] = sample ? 1 : 0;
    this.scoreTargets[i] = score?.target ?? -1;
    this.scoreTop[i] = score?.top ?? 0;
  }

  /** the row's score request, or null (an ordinary row) */
  scoreOf(i: number): { target: number; top: number } | null {
    const target = this.scoreTargets[i] as number;
    return target < 0 ? null : { target, top: this.scoreTop[i] as number };
  }

  private grow(): void {
    const capacity = this.tokens.length * 2;
    const tokens = new Int32Array(capacity);
    tokens.set(this.tokens);
    const pos = new Int32Array(capacity);
    pos.set(this.pos);
    const seqIds = new Int32Array(capacity);
    seqIds.set(this.seqIds);
    const sample = new Uint8Array(capacity);
    sample.set(this.sample);
    const scoreTargets = new Int32Array(capacity);
    scoreTargets.set(this.scoreTargets);
    const scoreTop = new Int32Array(capacity);
    scoreTop.set(this.scoreTop);
    this.tokens = tokens;
    this.pos = pos;
    this.seqIds = seqIds;
    this.sample = sample;
    this.scoreTargets = scoreTargets;
    this.scoreTop = scoreTop;
  }
}

/** How the runner lays out its KV cells (core/kv/kv-spec.ts): one unified pool, or a stream per sequence. */
export { KV_LAYOUTS, type KvLayout } from "../../core/kv/kv-spec.js";

export interface ModelRunner {
  readonly modelId: string;
  /** KV cells of the pool, over every slot */
  readonly kvCells: number;
  readonly kvLayout: KvLayout;
  /** sequence slots 0..maxSeqs-1 */
  readonly maxSeqs: number;
  /** longest sequence one slot may hold (the model's context window; with streams, also the slot's stream) */
  readonly maxContextTokens: number;
  readonly kvBytesPerToken: number;
  /**
   * Tokens a sliding-window layer attends to (0: no such layers). llama.cpp keeps only each sequence's last
   * window of those layers: older cells may be overwritten by any other sequence, and a saved state leaves
   * them out, so such a model's sequence is continued whole or not at all (core/kv/sequences/sequence-map.ts).
   */
  readonly slidingWindow: number;
  /** the model's weights in bytes (where they live: `device`) */
  readonly weightBytes: number;
  /** token ids are 0..vocabSize-1 */
  readonly vocabSize: number;
  /** where the model and its KV cache run */
  readonly device: DeviceInfo;

  /** Prompt text -> token ids (BOS as the model wants, chat-template control tokens recognised). */
  tokenize(text: string): Int32Array;
  /**
   * The same as tokenize, without holding the event loop while it runs; `addSpecial: false` leaves out the
   * special tokens the tokenizer adds (BOS...).
   */
  tokenizeAsync(text: string, options?: { readonly addSpecial?: boolean }): Promise<Int32Array>;
  /** Raw bytes of one token's text (may be part of a UTF-8 character; empty for control tokens). */
  tokenPiece(token: number): Uint8Array;
  /** Tokens of text that follows other tokens: no BOS, control tokens recognised. */
  tokenizeContinuation(text: string): Int32Array;
  /** A token's bytes as a chat template writes it: control tokens as their text (`<|im_end|>`). */
  templatePiece(token: number): Uint8Array;
  /** Token ids -> text as the tokenizer decodes them, control tokens as their text. */
  detokenize(tokens: Int32Array): string;
  isEog(token: number): boolean;
  /** every end-of-generation token of the vocabulary (what min_tokens bans) */
  eogTokens(): readonly number[];
  /** the model's Jinja chat template (GGUF `tokenizer.chat_template`) and special tokens */
  readonly chatTemplate: ModelChatTemplate;
  /** The model's chat template over `messages`, ending with the assistant's generation prompt unless told not to. */
  renderChat(messages: readonly ChatMessageIn[], options?: RenderChatOptions): string;

  /** Sampler of a slot (null: greedy); resets its grammar and RNG. */
  setSampler(seqId: number, sampling: RunnerSampling | null): void;
  /** Advances the slot's sampler state (grammar) by a token it did not sample itself. */
  acceptToken(seqId: number, token: number): void;

  /** Decodes every row (any size: the runner splits it as it must) and samples the rows that ask. */
  execute(batch: RunnerBatch): Promise<ExecuteResult>;

  /** Drops positions [p0, p1) of a slot (p1 < 0: to the end). */
  removeSeq(seqId: number, p0?: number, p1?: number): void;
  /** dst shares src's cells for positions [0, nTokens) (dst must hold none of those positions); unified only. */
  copySeq(srcSeqId: number, dstSeqId: number, nTokens: number): void;
  /** Serialises one slot's KV (the cells stay in the pool). */
  saveSeq(seqId: number, take?: (bytes: number) => Buffer): Promise<Buffer>;
  /** Memory saveSeq copies into fastest (page-locked when the KV lives on a GPU); ordinary Buffers without it. */
  allocateStateBuffer?(bytes: number): Buffer;
  /** Restores saveSeq() output into a slot, replacing what it held; resolves to the positions it then holds. */
  restoreSeq(seqId: number, state: Buffer): Promise<number>;
  /**
   * Empties every slot and places new KV from the pool's first cell again. llama.cpp places KV from a moving
   * head, and a sequence placed high leaves each later step's attention checking every cell below it.
   */
  clearPool(): void;

  /** Frees the model and its KV pool. */
  close(): Promise<void>;
}

/** An error with llama.cpp's code for a full KV pool (both runners throw it the same way). */
export function noKvSlotError(message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code: "LLAMA_DECODE_NO_KV_SLOT" });
}
