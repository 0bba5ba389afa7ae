import type { TokenIdContent } from "../../core/kv/token-content.js";
import type { FinishReason, GenerateRequest } from "../engine-api.js";
import { EngineRejection } from "../engine-api.js";
import type { ModelRunner } from "../runners/model-runner.js";
import { TurnContinuations } from "./turn-continuation.js";

/** Requests counted at once whose tokens are kept for their generate() (others tokenize again). */
const COUNTED_PROMPTS_KEPT = 32;
/** Token ids of programs' last turns kept to splice their next prompts (4 bytes each: 16 MB). */
const CONTINUATION_TOKENS_KEPT = 4_000_000;
type ProgramRef = Pick<GenerateRequest, "programId" | "cacheSalt">;

const NO_PROGRAM: ProgramRef = { programId: null };

/** A program's turns continue each other within one tenant and cache salt only. */
function continuationKey(salt: string | null | undefined, programId: string): string {
  return `${salt ?? ""}\u0000${programId}`;
}

/** Counted prompts are kept per program: the same text continues each program's own last turn. */
function countedKey(ref: ProgramRef, text: string): string {
  const program = ref.programId;
  return `${program === null ? "" : continuationKey(ref.cacheSalt, program)}\u0001${text}`;
}

/**
 * A prompt's token ids, computed once: the server counts a prompt just before queueing it and generate()
 * takes that tokenization; a program's next prompt starts with its last turn's ids (prompt and generated
 * output, turn-continuation.ts) so the KV of what the model generated is found again.
 */
export class PromptIds {
  /** prompts counted and not yet queued, oldest first */
  private readonly counted = new Map<string, Int32Array>();
  private readonly continuations = new TurnContinuations(CONTINUATION_TOKENS_KEPT);

  constructor(private readonly runner: ModelRunner) {}

  countTokens(text: string): number {
    return this.remember(countedKey(NO_PROGRAM, text), this.runner.tokenize(text));
  }

  async countPromptTokens(text: string, program: ProgramRef | null): Promise<number> {
    const ref = program ?? NO_PROGRAM;
    const ids = this.splice(ref, text) ?? (await this.runner.tokenizeAsync(text));
    return this.remember(countedKey(ref, text), ids);
  }

  /** A request's prompt ids: the client's own ids, checked, else a counted or spliced tokenization. */
  prepare(spec: GenerateRequest, vocabSize: number): Int32Array {
    if (spec.promptTokenIds) return checkedTokenIds(spec.promptTokenIds, vocabSize);
    const key = countedKey(spec, spec.prompt);
    const counted = this.counted.get(key);
    if (counted !== undefined) {
      this.counted.delete(key);
      return counted;
    }
    return this.splice(spec, spec.prompt) ?? this.runner.tokenize(spec.prompt);
  }

  /** A program's finished turn, for splicing its next prompt; its last turn (or an aborted one), forgotten. */
  rememberTurn(
    spec: GenerateRequest,
    reason: FinishReason,
    content: TokenIdContent,
    promptTokens: number,
  ): void {
    if (spec.programId === null) return;
    const ids = () => Array.from({ length: content.length }, (_, i) => content.tokenAt(i));
    const program = continuationKey(spec.cacheSalt, spec.programId);
    if (spec.isLastStep || reason === "abort") {
      this.continuations.forget(program);
      return;
    }
    this.continuations.remember(program, spec.prompt, ids(), promptTokens);
  }

  private remember(key: string, ids: Int32Array): number {
    this.counted.delete(key);
    this.counted.set(key, ids);
    if (this.counted.size > COUNTED_PROMPTS_KEPT)
      this.counted.delete(this.counted.keys().next().value as string);
    return ids.length;
  }

  /** The prompt's ids spliced onto its program's last turn; null: none. */
  private splice(ref: ProgramRef, text: string): Int32Array | null {
    if (ref.programId === null) return null;
    return this.continuations.splice(continuationKey(ref.cacheSalt, ref.programId), text, this.runner);
  }
}

/** The ids as an Int32Array; one outside the vocabulary is an EngineRejection naming it. */
export function checkedTokenIds(ids: readonly number[], vocabSize: number): Int32Array {
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
  if (bad !== undefined) {
    throw new EngineRejection(
      `token id ${bad} is not in the vocabulary (0 to ${vocabSize - 1})`,
      "invalid_request",
    );
  }
  return Int32Array.from(ids);
}
