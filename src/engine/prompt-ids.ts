import type { TokenIdContent } from "../core/kv/token-content.js";
import type { FinishReason, GenerateRequest } from "./engine-api.js";
import { EngineRejection } from "./engine-api.js";
import { ImplicitPrograms } from "./implicit-programs.js";
import type { ModelRunner } from "./model-runner.js";
import { TurnContinuations } from "./turn-continuation.js";

/** Requests counted at once whose tokens are kept for their generate() (others tokenize again). */
const COUNTED_PROMPTS_KEPT = 32;
/** Token ids of programs' last turns kept to splice their next prompts (4 bytes each: 16 MB). */
const CONTINUATION_TOKENS_KEPT = 4_000_000;
/** Recent turns of programs without a client id, matched against id-less prompts (16 MB at most). */
const IMPLICIT_PROGRAM_LIMITS = { maxTurns: 1024, maxTokens: 4_000_000, turnsPerProgram: 4 };

type ProgramRef = Pick<GenerateRequest, "programId" | "cacheSalt" | "implicitProgramId">;

/** A prompt's token ids, and the program its request runs in (an implicit one resolved). */
export interface PreparedPrompt {
  readonly ids: Int32Array;
  readonly programId: string | null;
}

const NO_PROGRAM: ProgramRef = { programId: null };

/** A program's turns continue each other within one tenant and cache salt only. */
function continuationKey(salt: string | null | undefined, programId: string): string {
  return `${salt ?? ""}\u0000${programId}`;
}

/** The program a request names: its client's, else the one the server proposed for it. */
const namedProgram = (ref: ProgramRef) => ref.programId ?? ref.implicitProgramId ?? null;

/** Counted prompts are kept per program: the same text continues each program's own last turn. */
function countedKey(ref: ProgramRef, text: string): string {
  const program = namedProgram(ref);
  return `${program === null ? "" : continuationKey(ref.cacheSalt, program)}\u0001${text}`;
}

/**
 * A prompt's token ids, computed once: the server counts a prompt just before queueing it and generate()
 * takes that tokenization; a program's next prompt starts with its last turn's ids (prompt and generated
 * output, turn-continuation.ts) so the KV of what the model generated is found again. A request whose client
 * named no program joins the program whose recent turn it continues (implicit-programs.ts).
 */
export class PromptIds {
  /** prompts counted and not yet queued, oldest first */
  private readonly counted = new Map<string, PreparedPrompt>();
  private readonly continuations = new TurnContinuations(CONTINUATION_TOKENS_KEPT);
  private readonly implicit: ImplicitPrograms;

  constructor(
    private readonly runner: ModelRunner,
    blockSizeTokens: number,
  ) {
    this.implicit = new ImplicitPrograms(blockSizeTokens, IMPLICIT_PROGRAM_LIMITS);
  }

  countTokens(text: string): number {
    return this.remember(countedKey(NO_PROGRAM, text), { ids: this.runner.tokenize(text), programId: null });
  }

  async countPromptTokens(text: string, program: ProgramRef | null): Promise<number> {
    const ref = program ?? NO_PROGRAM;
    const prepared = this.splice(ref, text) ?? {
      ids: await this.runner.tokenizeAsync(text),
      programId: namedProgram(ref),
    };
    return this.remember(countedKey(ref, text), prepared);
  }

  /**
   * A request's prompt ids (the client's own ids, checked, else a counted or spliced tokenization) and the
   * program it runs in.
   */
  prepare(spec: GenerateRequest, vocabSize: number): PreparedPrompt {
    if (spec.promptTokenIds) {
      return { ids: checkedTokenIds(spec.promptTokenIds, vocabSize), programId: namedProgram(spec) };
    }
    const key = countedKey(spec, spec.prompt);
    const counted = this.counted.get(key);
    if (counted !== undefined) {
      this.counted.delete(key);
      return counted;
    }
    return (
      this.splice(spec, spec.prompt) ?? {
        ids: this.runner.tokenize(spec.prompt),
        programId: namedProgram(spec),
      }
    );
  }

  /**
   * A program's finished turn (`spec` with the program it ran in), for splicing its next prompt; its last
   * turn (or an aborted one), forgotten.
   */
  rememberTurn(
    spec: GenerateRequest,
    reason: FinishReason,
    content: TokenIdContent,
    promptTokens: number,
  ): void {
    if (spec.programId === null) return;
    const ids = () => Array.from({ length: content.length }, (_, i) => content.tokenAt(i));
    if (spec.implicitProgramId !== undefined) {
      const scope = spec.cacheSalt ?? "";
      if (spec.isLastStep) this.implicit.forgetProgram(scope, spec.programId);
      else if (reason !== "abort")
        this.implicit.remember(scope, spec.programId, spec.prompt, ids(), promptTokens);
      return;
    }
    const program = continuationKey(spec.cacheSalt, spec.programId);
    if (spec.isLastStep || reason === "abort") {
      this.continuations.forget(program);
      return;
    }
    this.continuations.remember(program, spec.prompt, ids(), promptTokens);
  }

  private remember(key: string, prepared: PreparedPrompt): number {
    this.counted.delete(key);
    this.counted.set(key, prepared);
    if (this.counted.size > COUNTED_PROMPTS_KEPT)
      this.counted.delete(this.counted.keys().next().value as string);
    return prepared.ids.length;
  }

  /** The prompt's ids spliced onto its program's last turn, or onto the recent turn it continues; null: none. */
  private splice(ref: ProgramRef, text: string): PreparedPrompt | null {
    if (ref.programId !== null) {
      const ids = this.continuations.splice(continuationKey(ref.cacheSalt, ref.programId), text, this.runner);
      return ids === null ? null : { ids, programId: ref.programId };
    }
    if (ref.implicitProgramId === undefined) return null;
    return this.implicit.continued(ref.cacheSalt ?? "", text, this.runner);
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
