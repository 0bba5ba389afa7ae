/**
 * Programs of clients that name none (Qwen Code sends only its growing conversation). Such a request joins
 * the program of a recent turn whose prompt and output it repeats, in whole KV blocks: all of that turn's
 * prompt, at least one generated token, and every full block of the prompt and output whose KV exists (the
 * last generated token was never fed). Those are the token ids a prefix-cache hit would reuse, so a request
 * joins a program exactly when it continues that program's context. Anything else starts a program of its
 * own. Pins, program-level FCFS and output reuse then work as for a client that sends an id.
 *
 * A few recent turns are kept per program, so a side request that extends the conversation (a check, a
 * summary) does not hide the turn the conversation goes on from. Turns are matched only within one scope
 * (tenant and cache salt).
 */
import {
  type ContinuationTokenizer,
  type KeptTurn,
  keptTurn,
  type Repeat,
  repeatOf,
  splicedIds,
} from "./turn-continuation.js";

export interface ImplicitProgramLimits {
  /** turns kept over all programs, least recently used first out */
  readonly maxTurns: number;
  /** token ids kept over all turns (4 bytes each) */
  readonly maxTokens: number;
  /** a program's most recent turns kept */
  readonly turnsPerProgram: number;
}

interface RecentTurn {
  readonly scope: string;
  readonly programId: string;
  readonly turn: KeptTurn;
  /** the prompt's last characters: a cheap test before its digest */
  readonly promptTail: string;
}

const TAIL_CHARS = 64;

/** The program a prompt continues, and the prompt's token ids spliced onto that turn's. */
export interface ContinuedProgram {
  readonly programId: string;
  readonly ids: Int32Array;
}

export class ImplicitPrograms {
  /** least recently used first */
  private readonly turns = new Map<number, RecentTurn>();
  private nextKey = 0;
  private tokens = 0;

  constructor(
    private readonly blockSizeTokens: number,
    private readonly limits: ImplicitProgramLimits,
  ) {}

  get size(): number {
    return this.turns.size;
  }

  remember(
    scope: string,
    programId: string,
    prompt: string,
    ids: ArrayLike<number>,
    promptTokens: number,
  ): void {
    if (ids.length > this.limits.maxTokens) return;
    const own = [...this.turns].filter(([, t]) => t.scope === scope && t.programId === programId);
    const excess = own.length - this.limits.turnsPerProgram + 1;
    for (const [key] of own.slice(0, Math.max(0, excess))) this.drop(key);
    const turn = keptTurn(prompt, ids, promptTokens);
    this.turns.set(this.nextKey++, { scope, programId, turn, promptTail: prompt.slice(-TAIL_CHARS) });
    this.tokens += turn.ids.length;
    while (this.tokens > this.limits.maxTokens || this.turns.size > this.limits.maxTurns) {
      this.drop(this.turns.keys().next().value as number);
    }
  }

  /** A program that ended: its turns are continued no more. */
  forgetProgram(scope: string, programId: string): void {
    for (const [key, t] of this.turns) if (t.scope === scope && t.programId === programId) this.drop(key);
  }

  /**
   * The program whose recent turn `prompt` continues (the one it repeats furthest, the most recent on a tie),
   * with the prompt's ids spliced onto that turn's; null when it continues none.
   */
  continued(scope: string, prompt: string, tokenizer: ContinuationTokenizer): ContinuedProgram | null {
    let best: { key: number; recent: RecentTurn; repeat: Repeat } | null = null;
    for (const [key, recent] of this.turns) {
      const { turn } = recent;
      const wholeBlocks = Math.floor((turn.ids.length - 1) / this.blockSizeTokens) * this.blockSizeTokens;
      if (recent.scope !== scope || wholeBlocks === 0) continue;
      if (!prompt.startsWith(recent.promptTail, turn.promptChars - recent.promptTail.length)) continue;
      const repeat = repeatOf(turn, prompt, tokenizer);
      if (repeat === null || repeat.kept <= turn.promptTokens || repeat.kept < wholeBlocks) continue;
      if (best === null || repeat.kept >= best.repeat.kept) best = { key, recent, repeat };
    }
    if (best === null) return null;
    this.turns.delete(best.key);
    this.turns.set(best.key, best.recent);
    return { programId: best.recent.programId, ids: splicedIds(best.recent.turn, best.repeat, tokenizer) };
  }

  private drop(key: number): void {
    const recent = this.turns.get(key);
    if (!recent) return;
    this.turns.delete(key);
    this.tokens -= recent.turn.ids.length;
  }
}
