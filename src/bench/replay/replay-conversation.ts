/**
 * The synthetic conversation one replayed agent program sends, turn by turn. Turn i's messages are
 * turn i-1's messages + the reply the server actually returned + one new observation (the tool's
 * output), sized so the prompt totals the trace's `input` tokens; everything before the new message
 * is byte-identical to what the server saw and generated last turn, so its KV can be reused. When the
 * trace's `cached` is well below what the previous request held (SWE-agent elides old tool outputs),
 * the observation where the prefix should break is replaced by a short placeholder.
 */
import { Rng } from "../../core/rng.js";
import type { TraceTurn } from "../../workload/trace.js";
import type { ReplayMessage, ReplayRole, TokenCounter } from "./replay-tokens.js";
import { REPLAY_WORDS } from "./replay-words.js";

export type ObservationRole = "user" | "tool";

export interface ConversationOptions {
  /** the program's trace id: seeds its words */
  readonly programKey: string;
  /**
   * the id named in its system prompt (default programKey): the id sent, unique per run, so a server
   * never finds one run's prompts cached from an earlier run
   */
  readonly programName?: string;
  readonly seed: number;
  readonly counter: TokenCounter;
  /** role of tool outputs (default "user": every chat template accepts it) */
  readonly observationRole?: ObservationRole;
}

export interface ReplayPrompt {
  /** the messages to send (a copy) */
  readonly messages: ReplayMessage[];
  /** the client's count of the prompt's tokens (exact for the built-in model) */
  readonly tokens: number;
  /** the trace's input tokens */
  readonly targetTokens: number;
  /** the client's count of the leading tokens unchanged since the previous prompt + reply */
  readonly keptPrefixTokens: number;
  /** observations elided for this turn */
  readonly elided: number;
}

type MessageKind = "system" | "task" | "reply" | "observation" | "elided";

/** 32-bit FNV-1a of a string, to give each program its own word stream. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export class ReplayConversation {
  private readonly messages: ReplayMessage[] = [];
  private readonly kinds: MessageKind[] = [];
  private readonly sizes: number[] = [];
  private readonly rng: Rng;
  private readonly counter: TokenCounter;
  private readonly observationRole: ObservationRole;
  private previous: TraceTurn | null = null;
  private awaitingReply = false;

  constructor(private readonly options: ConversationOptions) {
    this.counter = options.counter;
    this.observationRole = options.observationRole ?? "user";
    this.rng = new Rng((hashString(options.programKey) ^ Math.imul(options.seed >>> 0, 0x9e3779b1)) >>> 0);
  }

  /** The prompt of the next turn; after the first, `addReply` must have recorded the last reply. */
  prompt(turn: TraceTurn): ReplayPrompt {
    if (this.awaitingReply) throw new Error("addReply must record the previous turn's reply first");
    let keptPrefixTokens = 0;
    let elided = 0;
    if (this.previous === null) {
      this.push("system", "system", this.systemPrompt(turn.input));
      const room = turn.input - this.total() - this.counter.messageTokens({ role: "user", content: "" });
      this.pushWords("task", "user", room);
    } else {
      keptPrefixTokens = this.total() - this.counter.generationPromptTokens;
      const held = this.previous.input + this.previous.output;
      if (turn.cached + Math.max(8, Math.round(0.02 * held)) < held) {
        const first = this.elideAt(turn.cached);
        if (first !== -1) {
          elided++;
          keptPrefixTokens = this.startOf(first);
          // Make room for the new observation by eliding later ones too, as the agent would.
          const minimal = this.counter.messageTokens({ role: this.observationRole, content: "ok" });
          for (let k = first + 1; k < this.messages.length && this.total() + minimal > turn.input; k++) {
            if (this.kinds[k] === "observation") {
              this.elide(k);
              elided++;
            }
          }
        }
      }
      const overhead = this.counter.messageTokens({ role: this.observationRole, content: "" });
      this.pushWords("observation", this.observationRole, turn.input - this.total() - overhead);
    }
    this.previous = turn;
    this.awaitingReply = true;
    return {
      messages: this.messages.map((m) => ({ ...m })),
      tokens: this.total(),
      targetTokens: turn.input,
      keptPrefixTokens,
      elided,
    };
  }

  /** Records the assistant reply the server returned for the last prompt. */
  addReply(text: string): void {
    if (!this.awaitingReply) throw new Error("no prompt is waiting for a reply");
    this.push("reply", "assistant", text);
    this.awaitingReply = false;
  }

  /** Names the program (so programs share no prefix); short when the first prompt is. */
  private systemPrompt(firstPromptTokens: number): string {
    const name = `You are agent ${this.options.programName ?? this.options.programKey}.`;
    return firstPromptTokens < 200
      ? name
      : `${name} Work on the task step by step and call one tool per step.`;
  }

  /** Client-side prompt tokens of the messages so far (with the generation prompt). */
  private total(): number {
    let sum = this.counter.bosTokens + this.counter.generationPromptTokens;
    for (const s of this.sizes) sum += s;
    return sum;
  }

  /** Tokens before message k. */
  private startOf(k: number): number {
    let sum = this.counter.bosTokens;
    for (let j = 0; j < k; j++) sum += this.sizes[j]!;
    return sum;
  }

  private push(kind: MessageKind, role: ReplayRole, content: string, tokens?: number): void {
    const message = { role, content };
    this.messages.push(message);
    this.kinds.push(kind);
    this.sizes.push(tokens ?? this.counter.messageTokens(message));
  }

  private pushWords(kind: MessageKind, role: ReplayRole, contentTokens: number): void {
    const { content, messageTokens } = this.words(role, contentTokens);
    this.push(kind, role, content, messageTokens);
  }

  /**
   * Elides the observation where a prefix of `cachedTokens` ends (the last one starting at or before
   * it, else the first one). Returns its index, or -1 when there is no observation left to elide.
   */
  private elideAt(cachedTokens: number): number {
    let chosen = -1;
    let start = this.counter.bosTokens;
    for (let k = 0; k < this.messages.length; k++) {
      if (this.kinds[k] === "observation" && (chosen === -1 || start <= cachedTokens)) chosen = k;
      start += this.sizes[k]!;
    }
    if (chosen !== -1) this.elide(chosen);
    return chosen;
  }

  private elide(k: number): void {
    const message = this.messages[k]!;
    const lines = message.content.split("\n").length;
    message.content = `Old tool output: (${lines} lines omitted)`;
    this.kinds[k] = "elided";
    this.sizes[k] = this.counter.messageTokens(message);
  }

  /**
   * Seeded words laid out in lines, `contentTokens` tokens by the counter (exactly, unless one word is
   * already more); the message's size in tokens with them, role header included.
   */
  private words(role: ReplayRole, contentTokens: number): { content: string; messageTokens: number } {
    const counter = this.counter;
    const pieces: string[] = [];
    const costs: number[] = [];
    let lineLeft = 0;
    let estimate = 0;
    // A piece no larger than `room` tokens when one turns up within a few draws, so the content
    // lands on its target instead of overshooting by a long word.
    const addPiece = (room: number) => {
      const first = pieces.length === 0;
      const newLine = !first && lineLeft <= 0 && room >= 4;
      let piece = "";
      let cost = 0;
      for (let attempt = 0; attempt < 16; attempt++) {
        const word = this.rng.pick(REPLAY_WORDS);
        piece = first ? word : newLine ? `\n${word}` : ` ${word}`;
        cost = counter.pieceTokens(piece, first);
        if (cost <= room + 0.5) break;
      }
      if (first || newLine) lineLeft = this.rng.int(6, 16);
      lineLeft--;
      pieces.push(piece);
      costs.push(cost);
      estimate += cost;
    };
    const fill = (goal: number) => {
      do addPiece(goal - estimate);
      while (estimate < goal - 0.5);
    };
    fill(contentTokens);
    const overhead = counter.messageTokens({ role, content: "" });
    // Pieces of an exact counter add up (no need to tokenize long outputs); others are measured.
    const measure = () =>
      counter.exactPieces
        ? Math.round(estimate)
        : counter.messageTokens({ role, content: pieces.join("") }) - overhead;
    let best = { content: "", tokens: 0, error: Number.POSITIVE_INFINITY };
    for (let round = 0; ; round++) {
      const tokens = measure();
      const error = tokens - contentTokens;
      if (Math.abs(error) < Math.abs(best.error)) best = { content: pieces.join(""), tokens, error };
      if (error === 0 || round === 4) break;
      const goal = estimate - error;
      const before = pieces.length;
      if (error < 0) {
        fill(goal);
      } else {
        while (pieces.length > 1 && estimate - costs.at(-1)! >= goal - 0.5) {
          estimate -= costs.pop()!;
          pieces.pop();
        }
        if (pieces.length === before) break;
      }
    }
    return { content: best.content, messageTokens: overhead + best.tokens };
  }
}
