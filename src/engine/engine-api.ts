/**
 * The contract between the HTTP server and the serving engine. The server speaks OpenAI; the engine runs
 * the core scheduler over a model runner (llama.cpp, or a fake one in tests). Neither sees the other's
 * internals.
 */
import type { RetentionHints } from "../core/client-hints.js";
import type { SchedulerSnapshot } from "../core/scheduler-snapshot.js";
import type { DeviceInfo } from "./gpu/device-info.js";

/** The tool a finished output calls, as the server reads its model's call format; null: none found. */
export type ToolNamer = (output: string) => string | null;

export interface SamplingParams {
  /** <= 0 means greedy */
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
  readonly minP: number;
  readonly seed: number | null;
  /** the most tokens generated (the server's front decided it); the output also ends at the context's end */
  readonly maxTokens: number;
  /** stop strings; generation ends before them and they are not returned */
  readonly stop: readonly string[];
  /** GBNF grammar constraining the output (JSON mode, tool-call schemas) */
  readonly grammar: string | null;
  /** added to those tokens' logits before sampling (OpenAI's logit_bias; default none) */
  readonly logitBias?: readonly TokenBias[];
  /**
   * OpenAI's presence and frequency penalties (default 0): a token's logit less presencePenalty once it is
   * in this request's output, less frequencyPenalty for each time it is
   */
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  /**
   * vLLM's repetition_penalty (default 1: off): the logit of a token in the prompt or the output so far,
   * divided by it where positive, multiplied where not
   */
  readonly repetitionPenalty?: number;
  /** keep generating through end-of-generation tokens (load generators replaying traces) */
  readonly ignoreEos: boolean;
  /** tokens that end the output as the model's end-of-generation token does, ignoreEos or not (vLLM's) */
  readonly stopTokenIds?: readonly number[];
  /**
   * vLLM's min_tokens (default 0): until this many tokens are out, the end-of-generation and stop tokens
   * are not sampled and stop strings are not looked for
   */
  readonly minTokens?: number;
  /**
   * report every generated token's log-probability with this many most likely alternatives (0-20; OpenAI's
   * logprobs / top_logprobs); absent or null: none
   */
  readonly logprobs?: number | null;
  /**
   * report every prompt token's log-probability given the tokens before it, with this many most likely
   * alternatives (0-20; OpenAI's `echo` with `logprobs`); absent or null: none. The whole prompt is computed
   * (no cached prefix is reused: a reused position has no logits).
   */
  readonly promptLogprobs?: number | null;
  /**
   * vLLM's skip_special_tokens (default true): control tokens add nothing to the text; false writes them as
   * their names (a harmony model's `<|channel|>`, which its output's structure is read from)
   */
  readonly skipSpecialTokens?: boolean;
  /**
   * control tokens written into the text as their names though special tokens are skipped (llama-server's
   * preserved tokens: a format's tool-call and thinking markers, which its output is read by); each a text
   * that is one token of the model's, others are ignored
   */
  readonly preservedTokens?: readonly string[];
  /** a reasoning model's thinking ended once this many tokens are out (ThinkingBudget) */
  readonly thinkingBudget?: ThinkingBudget | null;
}

/**
 * A cap on a reasoning model's thinking: once `tokens` tokens are out while the thinking is open (from the
 * start when `open` is null, else once the output has `open`) and has not ended (`closedBy` came after
 * it), the engine writes `close` itself, token by token, and the model goes on to its answer.
 */
export interface ThinkingBudget {
  readonly tokens: number;
  readonly open: string | null;
  readonly closedBy: string;
  readonly close: string;
}

/** A token's log-probability under the model's raw distribution (before temperature, penalties and filters). */
export interface TokenLogprob {
  /** the token's bytes (a control token as its name, e.g. `<|im_end|>`; possibly part of a UTF-8 character) */
  readonly bytes: Uint8Array;
  readonly logprob: number;
}

/** A generated token's logprob and the `SamplingParams.logprobs` most likely tokens at its position. */
export interface OutputLogprob extends TokenLogprob {
  readonly top: readonly TokenLogprob[];
}

/** A prompt token's logprob given the tokens before it, with its id, its rank, and the alternatives' ids. */
export interface PromptLogprob extends OutputLogprob {
  readonly token: number;
  /** 1: the most likely token at its position */
  readonly rank: number;
  readonly top: readonly (TokenLogprob & { readonly token: number })[];
}

export interface TokenBias {
  readonly token: number;
  readonly bias: number;
}

export interface GenerateRequest {
  readonly requestId: string;
  /**
   * agent program id: the one its client named (the server's program-identity.ts), or the one the server
   * found for a client that names none (turn-programs.ts); null: a one-off request
   */
  readonly programId: string | null;
  readonly isLastStep: boolean;
  /** the program that spawned this one as a subagent, as the client says; null or absent: none said */
  readonly parentProgramId?: string | null;
  /** client-declared tool of this turn (`this_func_call`), wins over parsing the output */
  readonly toolHint: string | null;
  /**
   * the tool an output calls, read in the model's own call format (the server's chat formats); the engine
   * tells the scheduler what it reads when the turn ends (absent, or null for an output: the general parser's
   * reading)
   */
  readonly toolNamer?: ToolNamer;
  /** the client's TTL bound and expected tool duration for this turn's KV (default: none) */
  readonly retentionHints?: RetentionHints;
  /** earlier turns of its program the request carries (the model's answers in its chat history) */
  readonly priorTurns?: number;
  /** requests share cached KV only when their salts are equal (tenant and the client's cache_salt) */
  readonly cacheSalt?: string | null;
  /** fully rendered prompt text (chat template already applied) */
  readonly prompt: string;
  /** the prompt as token ids, used as they are instead of tokenizing `prompt` (then only its label) */
  readonly promptTokenIds?: readonly number[];
  /** the done event carries the prompt's and the output's token ids */
  readonly returnTokenIds?: boolean;
  readonly sampling: SamplingParams;
}

export type FinishReason = "stop" | "length" | "abort" | "kv_capacity";

export interface GenerateUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** prompt tokens whose KV was reused (resident prefix, pin, or reload from an offload tier) */
  readonly cachedTokens: number;
}

export type GenerateEvent =
  | {
      readonly type: "delta";
      readonly text: string;
      /**
       * with `SamplingParams.logprobs`: the tokens whose text this delta carries; the last delta, the rest
       * (the end-of-generation token, the tokens of a stop string that ended the text)
       */
      readonly logprobs?: readonly OutputLogprob[];
      /** with `returnTokenIds`: the ids of the same tokens */
      readonly tokenIds?: readonly number[];
      /** with `returnTokenIds`, on the request's first delta: the prompt's token ids */
      readonly promptTokenIds?: readonly number[];
      /**
       * once, as soon as the request's first step ran: its prompt's tokens and how many of them were cached
       * (as the done event's usage counts them), on a delta of its own (no text)
       */
      readonly promptUsage?: Pick<GenerateUsage, "promptTokens" | "cachedTokens">;
    }
  | {
      readonly type: "done";
      readonly finishReason: FinishReason;
      readonly text: string;
      /** the `stop` string that ended the text (its finishReason is "stop"); null otherwise */
      readonly stopSequence?: string | null;
      readonly usage: GenerateUsage;
      /** seconds from arrival to admission, to first token, to finish */
      readonly queueS: number;
      readonly ttftS: number | null;
      readonly e2eS: number;
      /** the program's job completion time (first arrival to this finish) when this turn ended it, else null */
      readonly programJctS: number | null;
      /** with `SamplingParams.logprobs`: every sampled token's, in order (`tokenIds.output`'s tokens) */
      readonly logprobs?: readonly OutputLogprob[];
      /** with `returnTokenIds`: the prompt's token ids and the generated ones */
      readonly tokenIds?: { readonly prompt: readonly number[]; readonly output: readonly number[] };
      /**
       * with `SamplingParams.promptLogprobs`: one entry per prompt token, each token's log-probability given
       * the tokens before it; the first token's is null (nothing precedes it)
       */
      readonly promptLogprobs?: readonly (PromptLogprob | null)[];
    };

export interface ChatTurn {
  readonly role: "system" | "user" | "assistant" | "tool";
  readonly content: string;
}

export interface RenderChatOptions {
  /** end with the assistant's generation prompt (default true: the prompt a reply is generated from) */
  readonly addGenerationPrompt?: boolean;
}

/** The model's own Jinja chat template and the special tokens a template writes. */
export interface ModelChatTemplate {
  /** `tokenizer.chat_template`; null when the model has none */
  readonly source: string | null;
  /**
   * `tokenizer.chat_template.tool_use`, the template for requests with tools that a model ships apart from
   * its default one (Hermes 2 Pro and 3, Command R); absent or null: none
   */
  readonly toolUseSource?: string | null;
  readonly bosToken: string;
  readonly eosToken: string;
  /** the end-of-generation token's id; null when the model names none */
  readonly eosTokenId: number | null;
  /** tokenizing a prompt adds BOS itself (a template's leading BOS is then dropped) */
  readonly addsBos: boolean;
}

/** A model without a template whose tokenizer adds no special tokens (test runners). */
export const NO_CHAT_TEMPLATE: ModelChatTemplate = {
  source: null,
  bosToken: "",
  eosToken: "",
  eosTokenId: null,
  addsBos: false,
};

export interface EngineMetrics {
  readonly running: number;
  readonly waiting: number;
  /** seconds the request waiting longest to start has waited so far (0: none waits) */
  readonly longestWaitS: number;
  readonly pinnedPrograms: number;
  /** fraction of KV blocks in use (running + pinned) */
  readonly kvUsage: number;
  /** KV block size in tokens, and the pool's blocks (vLLM's cache_config_info) */
  readonly kvBlockSizeTokens: number;
  readonly kvBlocks: number;
  readonly prefixQueryTokens: number;
  readonly prefixHitTokens: number;
  /** tokens sampled by the model (every request's output) */
  readonly generatedTokens: number;
  readonly preemptions: number;
  readonly pinsCreated: number;
  readonly pinsExpired: number;
  /** pins given up under memory pressure */
  readonly pinsSacrificed: number;
  /**
   * what the TTL model prices re-prefilling a 1024-token context at: from --profile, from the engine's
   * measured steps, or the default until it has measured enough
   */
  readonly prefill1kTokensS: number;
  /** what it prices bringing 1024 tokens back from the RAM tier at */
  readonly ramReload1kTokensS: number;
  /** seconds the model's steps took (decode and sampling), and of them the host's sampling, since start */
  readonly modelComputeS: number;
  readonly samplingS: number;
  /** what the engine holds in this process's memory, by owner (`continuum:memory_bytes`) */
  readonly memory: EngineMemory;
}

/** Bytes of host memory the engine holds, by owner; the rest of the process's RSS is the JS heap and runtime. */
export interface EngineMemory {
  /** the model's weights, when they live in RAM (a model on the CPU) */
  readonly modelBytes: number;
  /** llama.cpp's KV pool, when it lives in RAM */
  readonly kvPoolBytes: number;
  /** saved sequence states held by the RAM tier (bounded by --cpu-offload-gb) */
  readonly ramTierBytes: number;
  /** buffers kept for reuse by later saves */
  readonly stateBufferBytes: number;
  /** programs in the scheduler's table (their state lives on the JS heap) */
  readonly programs: number;
}

/** Where one program's KV is in the engine now: its longest sequence in the pool, its longest saved state in a tier. */
export interface ProgramKv {
  /** tokens in the pool, and who holds them: a running turn, its pin, or nobody (free, reusable by a next turn) */
  readonly poolTokens: number;
  readonly poolHolder: "running" | "pinned" | "reusable" | null;
  /** the RAM (`cpu`) or disk tier holding a saved state of its sequence, its tokens and bytes */
  readonly tier: "cpu" | "disk" | null;
  readonly tierTokens: number;
  readonly tierBytes: number;
}

/** Why the engine refuses a request; the server maps each code to a status. */
export class EngineRejection extends Error {
  constructor(
    message: string,
    readonly code:
      | "prompt_too_long"
      | "invalid_request"
      | "overloaded"
      | "shutting_down"
      | "draining"
      | "duplicate_request"
      | "too_many_programs",
    /** seconds a client should wait before retrying (overloaded) */
    readonly retryAfterS: number | null = null,
  ) {
    super(message);
    this.name = "EngineRejection";
  }
}

export interface EngineService {
  readonly modelId: string;
  /** context window of one sequence */
  readonly maxContextTokens: number;
  /** token ids are 0..vocabSize-1 */
  readonly vocabSize: number;
  /** where KV lives, for the start-up banner (e.g. "16128 KV tokens, RAM tier 4 GiB") */
  readonly kvSummary: string;
  /** where the model and its KV cache run (the banner, /metrics, the dashboard) */
  readonly device: DeviceInfo;
  readonly chatTemplate: ModelChatTemplate;
  /** Renders a chat with the model's template, ending with the assistant's generation prompt unless told not to. */
  renderChat(messages: readonly ChatTurn[], options?: RenderChatOptions): string;
  /**
   * A text's token ids, tokenized off the event loop, control tokens written in the text recognised;
   * `addSpecial`: with the special tokens the model's tokenizer adds (BOS...), as a prompt gets them.
   */
  tokenize(text: string, options: { readonly addSpecial: boolean }): Promise<readonly number[]>;
  /**
   * Each token's bytes as a chat template writes it (a control token as its text, `<|im_end|>`; a piece may
   * be part of a UTF-8 character). An id outside 0..vocabSize-1 is an EngineRejection.
   */
  tokenPieces(ids: readonly number[]): readonly Uint8Array[];
  /**
   * Token ids -> text as the model's tokenizer decodes them (control tokens as their text; a SentencePiece
   * vocabulary's leading space of the first word dropped). An id outside 0..vocabSize-1 is an EngineRejection.
   */
  detokenize(ids: readonly number[]): string;
  /**
   * A prompt's tokens, counted off the event loop (a long prompt takes a while to tokenize); generate() of
   * the same prompt for the same `program` reuses them. With a program, its next prompt keeps the token ids
   * its last turn generated (turn-continuation.ts), and only the rest is tokenized.
   */
  countPromptTokens(
    text: string,
    program?: Pick<GenerateRequest, "programId" | "cacheSalt"> | null,
  ): Promise<number>;
  /**
   * Queues a request and streams its output. Throws EngineRejection before the first event when the
   * request cannot be taken. Aborting the signal (client went away) ends the stream with finishReason
   * "abort" and releases the request's KV.
   */
  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent>;
  metrics(): EngineMetrics;
  /** the KV pool, tiers and programs as the scheduler holds them now (`/dashboard/state`) */
  snapshot(): SchedulerSnapshot;
  /** where each program's KV is now, by program id (programs with none are absent) */
  kvByProgram(): ReadonlyMap<string, ProgramKv>;
  /**
   * Ends an agent program without a turn (a router's finish-session): its pinned KV is released at
   * once. False when no live program has that id.
   */
  endProgram(programId: string): boolean;
  /**
   * The request in flight turns out to be a side request of its program, not a turn (a title request
   * sent before the session's first turn with tools): it is not counted as a turn, not pinned, and its
   * program's next prompt is not spliced onto it. Nothing happens once it finished.
   */
  markSideRequest(programId: string, requestId: string): void;
  /**
   * Drain for a balancer: from now on only turns of programs already here are taken (new programs get
   * a "draining" rejection and go to another replica); the rest is served as usual.
   */
  drainPrograms(): void;
  /** Stops taking requests, finishes in-flight ones, flushes the recorder. */
  shutdown(): Promise<void>;
}
