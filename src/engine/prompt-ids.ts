import type { FinishReason, GenerateRequest } from "./engine-api.js";
import { EngineRejection } from "./engine-api.js";
import type { ModelRunner } from "./model-runner.js";
import { TurnContinuations } from "./turn-continuation.js";

/** Requests counted at once whose tokens are kept for their generate() (others tokenize again). */
const COUNTED_PROMPTS_KEPT = 32;
/** Token ids of programs' last turns kept to splice their next prompts (4 bytes each: 16 MB). */
const CONTINUATION_TOKENS_KEPT = 4_000_000;

type ProgramRef = Pick<GenerateRequest, "programId" | "cacheSalt">;

/** A program's turns continue each other within one tenant and cache salt only. */
function continuationKey(spec: ProgramRef): string | null {
  return spec.programId === null ? null : `${spec.cacheSalt ?? ""}\u0000${spec.programId}`;
}

/** Counted prompts are kept per program: the same text continues each program's own last turn. */
function countedKey(program: string | null, text: string): string {
  return `${program ?? ""}\u0001${text}`;
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
    return this.remember(countedKey(null, text), this.runner.tokenize(text));
  }

  async countPromptTokens(text: string, program: ProgramRef | null): Promise<number> {
    const key = program === null ? null : continuationKey(program);
    const ids = (key === null ? null : this.splice(key, text)) ?? (await this.runner.tokenizeAsync(text));
    return this.remember(countedKey(key, text), ids);
  }

  /** The ids of a request's prompt: the client's own ids (checked), else a counted or spliced tokenization. */
  idsFor(spec: GenerateRequest, vocabSize: number): Int32Array {
    if (spec.promptTokenIds) return checkedTokenIds(spec.promptTokenIds, vocabSize);
    const program = continuationKey(spec);
    const key = countedKey(program, spec.prompt);
    const counted = this.counted.get(key);
    if (counted !== undefined) {
      this.counted.delete(key);
      return counted;
    }
    return (program === null ? null : this.splice(program, spec.prompt)) ?? this.runner.tokenize(spec.prompt);
  }

  /** A program's finished turn, for splicing its next prompt; its last turn (or an aborted one), forgotten. */
  rememberTurn(spec: GenerateRequest, reason: FinishReason, ids: () => number[], promptTokens: number): void {
    const program = continuationKey(spec);
    if (program === null) return;
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

  private splice(program: string, text: string): Int32Array | null {
    return this.continuations.splice(program, text, this.runner);
  }
}

function checkedTokenIds(ids: readonly number[], vocabSize: number): Int32Array {
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
  if (bad !== undefined) {
    throw new EngineRejection(
      `token id ${bad} is not in the vocabulary (0 to ${vocabSize - 1})`,
      "invalid_request",
    );
  }
  return Int32Array.from(ids);
}
