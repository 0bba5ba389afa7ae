import { NO_HINTS, type RetentionHints } from "./client-hints.js";
import type { TierName } from "./kv/offload-tiers.js";
import type { TokenContent } from "./kv/token-content.js";
import type { Program } from "./program.js";

export type RequestStatus = "waiting" | "running" | "finished" | "aborted";
export type FinishReason = "stop" | "length" | "abort" | "kv_capacity";

/** What a client (server, simulator, load generator) submits: one LLM call of an agent program. */
export interface RequestSpec {
  readonly requestId: string;
  /** Agent program (job) id; null when the client sent none: the request is then a program of its own. */
  readonly programId: string | null;
  readonly promptTokens: number;
  readonly maxOutputTokens: number;
  /** The client says no further turn follows (the fork's `is_last_step`). */
  readonly isLastStep: boolean;
  /** Tool the client says this turn calls (wins over the tool its executor reads from the output). */
  readonly toolHint?: string | null;
  readonly content: TokenContent;
  /** the client's word on how long this turn's KV is worth keeping */
  readonly retentionHints?: RetentionHints;
  /**
   * How many earlier turns of its program the request carries (the model's answers in its chat history);
   * more than 0 is a returning turn even where the program was not seen before (another replica served
   * its earlier turns). Absent: not known (a raw-text prompt).
   */
  readonly priorTurns?: number;
  /** when the request reached the server, if before the scheduler was given it (a serving loop's inbox) */
  readonly arrivalS?: number;
  /**
   * The client says this request's program is a subagent its parent program spawned (the parent waits on
   * it in a tool call); absent: not known.
   */
  readonly parentProgramId?: string | null;
}

/** One LLM call in flight. Mutable state is owned by the scheduler; everyone else reads it. */
export class Request {
  readonly id: string;
  readonly programId: string;
  readonly program: Program;
  readonly hasProgramId: boolean;
  readonly promptTokens: number;
  readonly maxOutputTokens: number;
  readonly isLastStep: boolean;
  readonly toolHint: string | null;
  readonly content: TokenContent;
  readonly retentionHints: RetentionHints;
  readonly arrivalS: number;
  readonly turnIndex: number;
  /** earlier turns of its program in the request itself (chat history); null when not known */
  readonly priorTurns: number | null;
  /** global arrival order; final tie-break of every priority */
  readonly sequenceNumber: number;

  /** when the scheduler will next re-prioritize this waiting request (policies with timed priorities) */
  priorityTimerS = Number.POSITIVE_INFINITY;
  status: RequestStatus = "waiting";
  finishReason: FinishReason | null = null;
  /** tokens of the sequence (prompt + output) whose KV is computed or loaded */
  numComputedTokens = 0;
  numOutputTokens = 0;
  /** full blocks of the sequence already registered in the prefix cache */
  numCachedBlocks = 0;
  /** leading full blocks already written to the offload tiers */
  numStoredBlocks = 0;
  blockIds: number[] = [];
  /** prompt tokens found in the GPU prefix cache (incl. a pin) at the latest admission */
  hitTokens = 0;
  /** prompt tokens reloaded from an offload tier at the latest admission */
  reloadTokens = 0;
  reloadTier: TierName | null = null;
  /**
   * Prompt tokens whose KV was reused (not computed) when the request was first scheduled: prefix hits
   * and reloads the executor really had, counted once (vLLM's num_cached_tokens). Null until then.
   */
  cachedTokens: number | null = null;
  /** the part of cachedTokens that came back from an offload tier */
  cachedReloadTokens = 0;
  numAdmissions = 0;
  /** was preempted and waits to run again */
  preempted = false;
  numPreemptions = 0;
  /** program held no resident KV when this request arrived (it was evicted or never pinned) */
  arrivedEvicted = false;
  admittedS: number | null = null;
  firstTokenS: number | null = null;
  finishS: number | null = null;
  /** running order index, for victim choice among equal priorities */
  admissionNumber = 0;
  /** policy-assigned waiting priority, compared lexicographically, smaller first */
  readonly priority: [number, number, number] = [0, 0, 0];
  /** the tool its finished output calls, as its executor read it (a serving engine); null: none read */
  calledTool: string | null = null;
  /**
   * Found, while in flight, to be no turn of its program but a request beside its turns (a client's title
   * request that arrived before the session's first turn with tools): its finish neither counts as a turn
   * nor pins, and its program's context and tool timing stay its turns'.
   */
  sideRequest = false;

  constructor(spec: RequestSpec, program: Program, arrivalS: number, sequenceNumber: number) {
    this.id = spec.requestId;
    this.program = program;
    this.programId = program.id;
    this.hasProgramId = spec.programId !== null;
    this.promptTokens = spec.promptTokens;
    this.maxOutputTokens = spec.maxOutputTokens;
    this.isLastStep = spec.isLastStep || spec.programId === null;
    this.toolHint = spec.toolHint ?? null;
    this.content = spec.content;
    this.retentionHints = spec.retentionHints ?? NO_HINTS;
    this.arrivalS = arrivalS;
    this.turnIndex = program.numArrived;
    this.priorTurns = spec.priorTurns ?? null;
    this.sequenceNumber = sequenceNumber;
  }

  /** a returning turn by the client's word, whatever this scheduler saw of its program */
  get continuesProgram(): boolean {
    return this.priorTurns !== null && this.priorTurns > 0;
  }

  /**
   * The length stop: whether an output of `outputTokens` tokens has reached the request's limit (the
   * scheduler finishes it "length"; the executor ends its text with that token).
   */
  reachesLengthLimit(outputTokens: number): boolean {
    return outputTokens >= this.maxOutputTokens;
  }

  /** Tokens in the sequence so far: the prompt plus sampled output. */
  get numTokens(): number {
    return this.promptTokens + this.numOutputTokens;
  }

  get isPrefilling(): boolean {
    return this.numComputedTokens < this.promptTokens;
  }

  get isDone(): boolean {
    return this.status === "finished" || this.status === "aborted";
  }
}
