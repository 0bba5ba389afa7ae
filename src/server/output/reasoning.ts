/**
 * A reasoning model's thinking, apart from its answer: Qwen3, QwQ and DeepSeek-R1's distills write
 * `<think>...</think>` before the answer (or their template opens the block in the prompt, and the output
 * starts inside it); other models other tags (`ThinkTags`, told from the template). Chat completions report
 * the thinking as `reasoning_content` (Messages as a thinking block, Responses as a reasoning item) and parse
 * tool calls in the answer only, as llama-server and vLLM's reasoning parsers do.
 */

/** The tags a model's thinking stands between. */
export interface ThinkTags {
  readonly open: string;
  readonly close: string;
  /**
   * the answer's own tags, where a model writes them after its thinking: `open` is left out of the answer,
   * and the content ends at `close` (Kimi K3's response section, Apriel's end marker)
   */
  readonly answer?: { readonly open?: string; readonly close: string };
}

export const THINK_TAGS: ThinkTags = { open: "<think>", close: "</think>" };

/** Each model family's tags, by what its template's text writes (the more specific first). */
const TEMPLATE_TAGS: readonly (ThinkTags & { readonly detect: string })[] = [
  // ByteDance Seed-OSS
  { detect: "</seed:think>", open: "<seed:think>", close: "</seed:think>" },
  // Hunyuan (Hy3): its template writes '</think{}>'.format(':opensource')
  { detect: "</think{}>", open: "<think:opensource>", close: "</think:opensource>" },
  // MiniMax M3
  { detect: "</mm:think>", open: "<mm:think>", close: "</mm:think>" },
  // Cohere (Command R7B, Command A): the answer follows in <|START_RESPONSE|>, a control token left out of the text
  { detect: "<|END_THINKING|>", open: "<|START_THINKING|>", close: "<|END_THINKING|>" },
  // Apriel 1.5 and 1.6 (ServiceNow): the thinking is prose until the final response's marker (1.6's
  // generation prompt opens it with this line)
  {
    detect: "[BEGIN FINAL RESPONSE]",
    open: "Here are my reasoning steps:\n",
    close: "[BEGIN FINAL RESPONSE]",
    answer: { close: "[END FINAL RESPONSE]" },
  },
  // Kimi K3: tags written <|open|>name<|sep|> ... <|close|>name<|sep|> (by its template's macros); the answer in
  // a response section, then a tools section
  {
    detect: "open_tag('think'",
    open: "<|open|>think<|sep|>",
    close: "<|close|>think<|sep|>",
    answer: { open: "<|open|>response<|sep|>", close: "<|close|>response<|sep|>" },
  },
  // Mistral's reasoning models (Magistral, Ministral 3 Reasoning)
  { detect: "[/THINK]", open: "[THINK]", close: "[/THINK]" },
  { detect: THINK_TAGS.close, ...THINK_TAGS },
];

/** The tags a template's model thinks between; null: the template writes no thinking. */
export function thinkTagsOf(source: string): ThinkTags | null {
  const found = TEMPLATE_TAGS.find((tags) => source.includes(tags.detect));
  if (!found) return null;
  const { detect: _, ...tags } = found;
  return tags;
}

/** Where the content of an answer starting at `from` ends: its closing tag, else the text's end. */
export function answerEnd(text: string, from: number, tags: ThinkTags): number {
  const close = tags.answer?.close;
  const at = close === undefined ? -1 : text.indexOf(close, from);
  return at === -1 ? text.length : at;
}

const leadingSpace = (text: string, from: number) => text.length - from - text.slice(from).trimStart().length;

/** How a spent thinking budget's block is closed, as Qwen3's and DeepSeek-R1's templates write it. */
export function budgetClose(tags: ThinkTags): string {
  return `\n${tags.close}\n\n`;
}

/** Whether a rendered prompt leaves a thinking block open: the output starts inside it. */
export function promptOpensThinking(prompt: string, tags: ThinkTags): boolean {
  return prompt.lastIndexOf(tags.open) > prompt.lastIndexOf(tags.close);
}

export interface ReasoningSplit {
  /** the thinking, without its tags and surrounding whitespace; null when the output has none */
  readonly reasoning: string | null;
  /** where the answer starts in the output (past the closing tag and the whitespace after it) */
  readonly answerStart: number;
}

/**
 * The output's thinking and where its answer starts; `insideThinking`: the prompt left a block open (null:
 * the output is not split, all of it is the answer).
 */
export function splitReasoning(
  text: string,
  insideThinking: boolean | null,
  { open, close, answer }: ThinkTags,
): ReasoningSplit {
  if (insideThinking === null) return { reasoning: null, answerStart: 0 };
  const lead = text.length - text.trimStart().length;
  const from = insideThinking ? 0 : text.startsWith(open, lead) ? lead + open.length : -1;
  if (from < 0) return { reasoning: null, answerStart: 0 };
  const end = text.indexOf(close, from);
  if (end < 0) return { reasoning: text.slice(from).trim(), answerStart: text.length };
  const after = end + close.length;
  let answerStart = after + leadingSpace(text, after);
  if (answer?.open !== undefined && text.startsWith(answer.open, answerStart)) {
    answerStart += answer.open.length;
    answerStart += leadingSpace(text, answerStart);
  }
  return { reasoning: text.slice(from, end).trim(), answerStart };
}

/**
 * splitReasoning over a stream: each piece of output in, the thinking and the answer it adds out. What could
 * still be a tag (or, right after one, whitespace) is held until the next piece tells. `answerStart` is known
 * once the answer began. With `insideThinking` null every piece is answer, as it comes.
 */
export class ReasoningStream {
  private mode: "start" | "thinking" | "answer";
  private held = "";
  private consumed = 0;
  /** whitespace is dropped until the thinking's (or the answer's) first other character */
  private trimming = true;
  /** the answer's opening tag, left out where it follows the thinking's close */
  private answerOpen: string | null = null;
  answerStart: number | null = null;

  constructor(
    insideThinking: boolean | null,
    private readonly tags: ThinkTags,
  ) {
    if (insideThinking === null) {
      this.mode = "answer";
      this.trimming = false;
      this.answerStart = 0;
    } else {
      this.mode = insideThinking ? "thinking" : "start";
    }
  }

  push(piece: string): { reasoning: string; answer: string } {
    this.held += piece;
    let reasoning = "";
    let answer = "";
    for (;;) {
      if (this.mode === "start") {
        const body = this.held.trimStart();
        if (body.startsWith(this.tags.open)) {
          this.take(this.held.length - body.length + this.tags.open.length);
          this.mode = "thinking";
          this.trimming = true;
          continue;
        }
        if (this.tags.open.startsWith(body)) return { reasoning, answer }; // may still become the tag
        this.mode = "answer";
        this.answerStart = this.consumed;
        this.trimming = false;
        continue;
      }
      if (this.mode === "thinking") {
        if (this.trimming) this.dropLeadingWhitespace();
        const end = this.held.indexOf(this.tags.close);
        if (end >= 0) {
          reasoning += this.take(end);
          this.take(this.tags.close.length);
          this.mode = "answer";
          this.trimming = true;
          this.answerOpen = this.tags.answer?.open ?? null;
          continue;
        }
        const keep = partialSuffix(this.held, this.tags.close);
        reasoning += this.take(this.held.length - keep);
        if (reasoning.length > 0) this.trimming = false;
        return { reasoning, answer };
      }
      if (this.trimming) {
        this.dropLeadingWhitespace();
        if (this.held.length === 0) return { reasoning, answer };
        const open = this.answerOpen;
        if (open !== null) {
          if (this.held.startsWith(open)) {
            this.take(open.length);
            this.answerOpen = null;
            continue;
          }
          if (open.startsWith(this.held)) return { reasoning, answer }; // may still become it
          this.answerOpen = null;
        }
        this.trimming = false;
        this.answerStart = this.consumed;
      }
      answer += this.take(this.held.length);
      return { reasoning, answer };
    }
  }

  /** The output ended: what was held (a tag that never completed is text of its part). */
  finish(): { reasoning: string; answer: string } {
    const rest = this.take(this.held.length);
    if (this.mode === "thinking") return { reasoning: rest, answer: "" };
    if (this.mode === "start" || !this.trimming) {
      this.answerStart ??= this.consumed - rest.length;
      return { reasoning: "", answer: rest };
    }
    // whitespace, or the beginning of an answer's opening tag that never came whole
    const body = rest.trimStart();
    if (body.length > 0) this.answerStart = this.consumed - body.length;
    return { reasoning: "", answer: body };
  }

  private take(n: number): string {
    const out = this.held.slice(0, n);
    this.held = this.held.slice(n);
    this.consumed += n;
    return out;
  }

  private dropLeadingWhitespace(): void {
    const body = this.held.trimStart();
    this.take(this.held.length - body.length);
  }
}

/**
 * answerEnd over a stream: the answer's pieces in, the content out, held back from where the answer's closing
 * tag may begin; nothing from the tag on is content.
 */
export class AnswerEndStream {
  private text = "";
  private sent = 0;
  private ended = false;

  constructor(private readonly close: string) {}

  push(piece: string): string {
    if (this.ended) return "";
    this.text += piece;
    const at = this.text.indexOf(this.close);
    this.ended = at !== -1;
    const upTo = this.ended ? at : this.text.length - partialSuffix(this.text, this.close);
    const out = this.text.slice(this.sent, Math.max(upTo, this.sent));
    this.sent += out.length;
    return out;
  }
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialSuffix(text: string, tag: string): number {
  for (let k = Math.min(tag.length - 1, text.length); k > 0; k--) {
    if (tag.startsWith(text.slice(text.length - k))) return k;
  }
  return 0;
}
