/**
 * A deterministic model runner in pure TypeScript, for fast tests (and the server's): tokens are Unicode
 * code points, and the "model" picks each next token from the KV it holds for the sequence, so batching,
 * prefix sharing, take-overs, restores and recomputes all give the same text as a sequence run alone,
 * and a wrong position or a missing prefix shows up as different text or an error. It keeps llama.cpp's
 * rules: one pool of `kvCells` cells shared through copySeq (or, with the streams layout, kvCells / maxSeqs
 * cells per slot and no copySeq), consecutive positions per slot, and LLAMA_DECODE_NO_KV_SLOT (changing
 * nothing) when a batch does not fit.
 *
 * Output: a chat prompt (ending with "<|im_start|>assistant\n") gets `reply(prompt)` followed by EOS;
 * anything else continues with hash-chosen letters and ends with EOS about one token in 48.
 */

import { renderChatML } from "../../gguf/index.js";
import { Engine, type EngineOptions } from "../engine.js";
import { type ModelChatTemplate, NO_CHAT_TEMPLATE, type RenderChatOptions } from "../engine-api.js";
import { cpuDeviceInfo, type DeviceInfo } from "../gpu/device-info.js";
import {
  type ChatMessageIn,
  type ExecuteResult,
  type KvLayout,
  type ModelRunner,
  noKvSlotError,
  type RunnerBatch,
  type RunnerSampling,
  type SampledLogprobs,
  type SampledOutput,
  type ScoredOutput,
} from "../runners/model-runner.js";

/**
 * The fake's distribution at a position it sampled `token` at: that token has probability 1/2 and the next
 * code points (after EOS: from 0) 1/4, 1/8, ... (the top list is the token and `top - 1` of those).
 */
export function fakeLogprobs(token: number, top: number): SampledLogprobs {
  return {
    logprob: -Math.LN2,
    top: Array.from({ length: top }, (_, k) => ({
      token: k === 0 ? token : (token + k) % FAKE_EOS,
      logprob: -(k + 1) * Math.LN2,
    })),
  };
}

/** The fake's end-of-generation token (just past the Unicode range). */
export const FAKE_EOS = 0x110000;
const GENERATION_PROMPT = Array.from("<|im_start|>assistant\n", (c) => c.codePointAt(0) as number);
const LETTERS = "abcdefghijklmnopqrstuvwxyz      .,\n";
const WORDS = [
  "the",
  "agent",
  "reads",
  "a",
  "file",
  "and",
  "runs",
  "tests",
  "then",
  "patches",
  "code",
  "tool",
  "call",
  "returns",
  "output",
  "quickly",
  "cache",
  "pins",
  "sequence",
  "step",
];

export interface FakeModelOptions {
  /** KV cells of the pool (default 16384) */
  readonly kvCells?: number;
  /** sequence slots (default 64) */
  readonly maxSeqs?: number;
  /** default unified */
  readonly kvLayout?: KvLayout;
  /** longest sequence (default kvCells; with streams at most kvCells / maxSeqs) */
  readonly maxContextTokens?: number;
  readonly kvBytesPerToken?: number;
  /** sliding-window layers' window (default 0: none), for the slot rules such a model needs */
  readonly slidingWindow?: number;
  /** ms every execute() takes (default 0) */
  readonly stepDelayMs?: number;
  /** extra ms per batch row (default 0) */
  readonly tokenDelayMs?: number;
  /** the reply to a chat prompt (default: 6-20 words chosen by a hash of the prompt) */
  readonly reply?: (prompt: string) => string;
  readonly modelId?: string;
}

interface FakeSeq {
  /** token per position; -1 = a hole (removed range) */
  tokens: number[];
  cells: number[];
  /** chained hash after each position, valid below hashedUpTo */
  hashes: number[];
  /** position just after the latest generation prompt ending at or before each position, or -1 */
  replyStarts: number[];
  hashedUpTo: number;
  sampling: RunnerSampling | null;
}

function mix(h: number, token: number): number {
  let x = Math.imul(h ^ token, 0x01000193) >>> 0;
  x ^= x >>> 15;
  return Math.imul(x, 0x2c1b3c6d) >>> 0;
}

/** Default chat reply: 6-20 words picked by a hash of the prompt. */
export function defaultFakeReply(prompt: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < prompt.length; i++) h = mix(h, prompt.charCodeAt(i));
  const n = 6 + (h % 15);
  const words: string[] = [];
  for (let i = 0; i < n; i++) {
    h = mix(h, i + 1);
    words.push(WORDS[h % WORDS.length] as string);
  }
  const text = words.join(" ");
  return text.charAt(0).toUpperCase() + text.slice(1) + ".";
}

function runnerError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

export class FakeModelRunner implements ModelRunner {
  readonly modelId: string;
  readonly kvCells: number;
  readonly kvLayout: KvLayout;
  readonly maxSeqs: number;
  readonly maxContextTokens: number;
  readonly kvBytesPerToken: number;
  readonly slidingWindow: number;
  /** every code point is a token */
  readonly vocabSize = FAKE_EOS + 1;
  readonly chatTemplate: ModelChatTemplate = NO_CHAT_TEMPLATE;
  readonly device: DeviceInfo = cpuDeviceInfo();
  /** no weights: replies are scripted */
  readonly weightBytes = 0;
  /** execute() calls and rows, for tests */
  executeCalls = 0;
  executedRows = 0;
  /** clearPool() calls, for tests */
  poolClears = 0;
  private readonly seqs: FakeSeq[];
  private readonly refs: Uint16Array;
  private readonly freeCells: number[] = [];
  private readonly replies = new Map<string, number[]>();
  private readonly reply: (prompt: string) => string;
  private readonly stepDelayMs: number;
  private readonly tokenDelayMs: number;
  private closed = false;

  constructor(options: FakeModelOptions = {}) {
    this.kvCells = options.kvCells ?? 16384;
    this.maxSeqs = options.maxSeqs ?? 64;
    this.kvLayout = options.kvLayout ?? "unified";
    const slotCells = this.kvLayout === "unified" ? this.kvCells : Math.floor(this.kvCells / this.maxSeqs);
    this.maxContextTokens = Math.min(options.maxContextTokens ?? this.kvCells, slotCells);
    this.kvBytesPerToken = options.kvBytesPerToken ?? 1024;
    this.slidingWindow = options.slidingWindow ?? 0;
    this.modelId = options.modelId ?? "continuum-fake";
    this.reply = options.reply ?? defaultFakeReply;
    this.stepDelayMs = options.stepDelayMs ?? 0;
    this.tokenDelayMs = options.tokenDelayMs ?? 0;
    this.refs = new Uint16Array(this.kvCells);
    for (let c = this.kvCells - 1; c >= 0; c--) this.freeCells.push(c);
    this.seqs = Array.from({ length: this.maxSeqs }, () => ({
      tokens: [],
      cells: [],
      hashes: [],
      replyStarts: [],
      hashedUpTo: 0,
      sampling: null,
    }));
  }

  /** Cells in use (independent of the engine's own ledger). */
  get usedCells(): number {
    return this.kvCells - this.freeCells.length;
  }

  /** Positions a slot holds (-1 when empty), like llama's seq_pos_max + 1. */
  seqLength(seqId: number): number {
    return this.seq(seqId).tokens.length;
  }

  tokenize(text: string): Int32Array {
    return Int32Array.from(Array.from(text, (c) => c.codePointAt(0) as number));
  }

  async tokenizeAsync(text: string): Promise<Int32Array> {
    return this.tokenize(text);
  }

  tokenPiece(token: number): Uint8Array {
    if (token === FAKE_EOS) return new Uint8Array(0);
    return Buffer.from(String.fromCodePoint(token), "utf8");
  }

  isEog(token: number): boolean {
    return token === FAKE_EOS;
  }

  eogTokens(): readonly number[] {
    return [FAKE_EOS];
  }

  tokenizeContinuation(text: string): Int32Array {
    return this.tokenize(text);
  }

  templatePiece(token: number): Uint8Array {
    return this.tokenPiece(token);
  }

  detokenize(tokens: Int32Array): string {
    return Buffer.concat(Array.from(tokens, (token) => this.tokenPiece(token))).toString("utf8");
  }

  renderChat(messages: readonly ChatMessageIn[], options: RenderChatOptions = {}): string {
    return renderChatML(messages, options.addGenerationPrompt ?? true);
  }

  setSampler(seqId: number, sampling: RunnerSampling | null): void {
    this.seq(seqId).sampling = sampling;
  }

  acceptToken(seqId: number, _token: number): void {
    this.seq(seqId);
  }

  async execute(batch: RunnerBatch): Promise<ExecuteResult> {
    this.checkOpen();
    const n = batch.length;
    // validate everything first: a rejected batch changes nothing
    const next = new Map<number, number>();
    for (let i = 0; i < n; i++) {
      const seqId = batch.seqIds[i] as number;
      const seq = this.seq(seqId);
      const expected = next.get(seqId) ?? seq.tokens.length;
      const pos = batch.pos[i] as number;
      if (pos !== expected) {
        throw runnerError(
          "LLAMA_DECODE_INVALID_BATCH",
          `seq ${seqId}: position ${pos} does not continue its KV (expected ${expected})`,
        );
      }
      if (pos >= this.maxContextTokens) {
        throw runnerError("LLAMA_DECODE_INVALID_BATCH", `seq ${seqId}: position ${pos} beyond the context`);
      }
      next.set(seqId, expected + 1);
    }
    if (n > this.freeCells.length) {
      throw noKvSlotError(`fake pool: ${n} cells needed, ${this.freeCells.length} free`);
    }
    const outputs: SampledOutput[] = [];
    const scores: ScoredOutput[] = [];
    for (let i = 0; i < n; i++) {
      const seqId = batch.seqIds[i] as number;
      const seq = this.seqs[seqId] as FakeSeq;
      seq.tokens.push(batch.tokens[i] as number);
      seq.cells.push(this.allocCell());
      const score = batch.scoreOf(i);
      if (score !== null) {
        const pos = batch.pos[i] as number;
        // the fake's distribution puts the target first
        scores.push({
          seqId,
          pos,
          token: score.target,
          logprobs: fakeLogprobs(score.target, score.top),
          rank: 1,
        });
      } else if (batch.sample[i] === 1) {
        const token = this.nextToken(seq);
        const top = seq.sampling?.logprobs ?? null;
        outputs.push({
          seqId,
          token,
          isEog: token === FAKE_EOS,
          ...(top === null ? {} : { logprobs: fakeLogprobs(token, top) }),
        });
      }
    }
    this.executeCalls++;
    this.executedRows += n;
    const delayMs = this.stepDelayMs + this.tokenDelayMs * n;
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    return { outputs, ...(scores.length > 0 ? { scores } : {}), computeS: delayMs / 1000, sampleS: 0 };
  }

  removeSeq(seqId: number, p0 = 0, p1 = -1): void {
    const seq = this.seq(seqId);
    const len = seq.tokens.length;
    const from = Math.max(0, p0);
    const to = p1 < 0 ? len : Math.min(p1, len);
    for (let p = from; p < to; p++) {
      const cell = seq.cells[p] as number;
      if (cell >= 0) this.unrefCell(cell);
      seq.tokens[p] = -1;
      seq.cells[p] = -1;
    }
    // trailing holes are simply gone
    let end = len;
    while (end > 0 && seq.tokens[end - 1] === -1) end--;
    seq.tokens.length = end;
    seq.cells.length = end;
    seq.hashedUpTo = Math.min(seq.hashedUpTo, from);
  }

  copySeq(srcSeqId: number, dstSeqId: number, nTokens: number): void {
    if (this.kvLayout !== "unified") throw new Error("copySeq needs the unified KV layout");
    const src = this.seq(srcSeqId);
    const dst = this.seq(dstSeqId);
    if (nTokens > src.tokens.length) throw new Error(`copySeq: seq ${srcSeqId} holds fewer than ${nTokens}`);
    for (let p = 0; p < nTokens; p++) {
      if (src.tokens[p] === -1) throw new Error(`copySeq: seq ${srcSeqId} has a hole at ${p}`);
      if (p < dst.tokens.length && dst.tokens[p] !== -1) {
        throw new Error(`copySeq: seq ${dstSeqId} already holds position ${p}`);
      }
    }
    while (dst.tokens.length < nTokens) {
      dst.tokens.push(-1);
      dst.cells.push(-1);
    }
    for (let p = 0; p < nTokens; p++) {
      const cell = src.cells[p] as number;
      this.refs[cell] = (this.refs[cell] as number) + 1;
      dst.tokens[p] = src.tokens[p] as number;
      dst.cells[p] = cell;
    }
    dst.hashedUpTo = 0;
  }

  clearPool(): void {
    for (let seqId = 0; seqId < this.maxSeqs; seqId++) this.removeSeq(seqId, 0, -1);
    this.poolClears++;
  }

  async saveSeq(seqId: number, take?: (bytes: number) => Buffer): Promise<Buffer> {
    this.checkOpen();
    const seq = this.seq(seqId);
    if (seq.tokens.includes(-1)) throw new Error(`saveSeq: seq ${seqId} has holes`);
    const state = Buffer.from(JSON.stringify({ fake: 1, tokens: seq.tokens }));
    if (!take) return state;
    const target = take(state.length);
    state.copy(target);
    return target.subarray(0, state.length);
  }

  async restoreSeq(seqId: number, state: Buffer): Promise<number> {
    this.checkOpen();
    const parsed = JSON.parse(state.toString("utf8")) as { fake?: number; tokens?: number[] };
    if (parsed.fake !== 1 || !Array.isArray(parsed.tokens)) {
      throw runnerError("LLAMA_STATE_LOAD_FAILED", "not a fake runner state");
    }
    this.removeSeq(seqId, 0, -1);
    if (parsed.tokens.length > this.freeCells.length || parsed.tokens.length > this.maxContextTokens) {
      throw noKvSlotError("fake pool: no room to restore");
    }
    const seq = this.seq(seqId);
    for (const token of parsed.tokens) {
      seq.tokens.push(token);
      seq.cells.push(this.allocCell());
    }
    seq.hashedUpTo = 0;
    return seq.tokens.length;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private seq(seqId: number): FakeSeq {
    const seq = this.seqs[seqId];
    if (!seq) throw new RangeError(`seq id ${seqId} out of range 0..${this.maxSeqs - 1}`);
    return seq;
  }

  private checkOpen(): void {
    if (this.closed) throw runnerError("LLAMA_CONTEXT_FREED", "fake runner is closed");
  }

  private allocCell(): number {
    const cell = this.freeCells.pop();
    if (cell === undefined) throw noKvSlotError("fake pool exhausted");
    this.refs[cell] = 1;
    return cell;
  }

  private unrefCell(cell: number): void {
    const r = (this.refs[cell] as number) - 1;
    if (r < 0) throw new Error(`fake pool: cell ${cell} freed twice`);
    this.refs[cell] = r;
    if (r === 0) this.freeCells.push(cell);
  }

  /** Brings the chained hashes and reply starts up to date; throws on a hole (attention over nothing). */
  private index(seq: FakeSeq): void {
    const len = seq.tokens.length;
    const g = GENERATION_PROMPT.length;
    for (let p = seq.hashedUpTo; p < len; p++) {
      const token = seq.tokens[p] as number;
      if (token === -1) throw runnerError("LLAMA_DECODE_FAILED", `sequence has no KV at position ${p}`);
      seq.hashes[p] = mix(p === 0 ? 0x811c9dc5 : (seq.hashes[p - 1] as number), token);
      let start = p === 0 ? -1 : (seq.replyStarts[p - 1] as number);
      if (p + 1 >= g) {
        let match = true;
        for (let k = 0; k < g && match; k++) match = seq.tokens[p + 1 - g + k] === GENERATION_PROMPT[k];
        if (match) start = p + 1;
      }
      seq.replyStarts[p] = start;
    }
    seq.hashes.length = len;
    seq.replyStarts.length = len;
    seq.hashedUpTo = len;
  }

  private nextToken(seq: FakeSeq): number {
    this.index(seq);
    const last = seq.tokens.length - 1;
    const start = seq.replyStarts[last] as number;
    if (start >= 0) {
      const key = String(seq.hashes[start - 1]);
      let reply = this.replies.get(key);
      if (!reply) {
        let prompt = "";
        for (let p = 0; p < start; p += 4096) {
          prompt += String.fromCodePoint(...seq.tokens.slice(p, Math.min(start, p + 4096)));
        }
        reply = Array.from(this.reply(prompt), (c) => c.codePointAt(0) as number);
        this.replies.set(key, reply);
      }
      const produced = seq.tokens.length - start;
      let onScript = produced <= reply.length;
      for (let k = 0; k < produced && onScript; k++) onScript = seq.tokens[start + k] === reply[k];
      if (onScript) return produced < reply.length ? (reply[produced] as number) : FAKE_EOS;
    }
    let h = seq.hashes[last] as number;
    const sampling = seq.sampling;
    if (sampling && sampling.temperature > 0 && sampling.seed !== null) h = mix(h, sampling.seed);
    if (h % 48 === 0) return FAKE_EOS;
    return LETTERS.codePointAt((h >>> 8) % LETTERS.length) as number;
  }
}

export interface FakeEngineOptions
  extends FakeModelOptions,
    Partial<Omit<EngineOptions, "runner" | "policy">> {
  /** scheduling policy name or instance (default "cachettl") */
  readonly policy?: EngineOptions["policy"];
}

/** A working EngineService over the fake runner (the real scheduler, KV mapping and streaming). */
export function createFakeEngine(options: FakeEngineOptions = {}): Engine {
  const runner = new FakeModelRunner(options);
  return new Engine({ ...options, runner, policy: options.policy ?? "cachettl" });
}
