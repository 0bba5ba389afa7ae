/**
 * Agent programs driven through `continuum gateway` for its end-to-end tests: each program a conversation
 * that grows turn by turn (its previous answer and a tool result appended), named by `X-Program-Id`, every
 * other turn streamed; each turn's backend (the gateway's `X-Continuum-Backend`) and the cached prompt tokens
 * its answer reports are kept.
 */
import assert from "node:assert/strict";

export interface TurnResult {
  readonly program: string;
  readonly turn: number;
  readonly backend: string;
  readonly promptTokens: number;
  readonly cachedTokens: number;
}

interface Message {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

function filler(topic: string, words: number): string {
  return Array.from({ length: words }, (_, i) => `${topic}-${i % 17} item ${i}`).join(" ");
}

export class GatewayPrograms {
  private readonly histories = new Map<string, Message[]>();
  readonly results: TurnResult[] = [];

  constructor(
    private readonly url: string,
    readonly names: readonly string[],
  ) {
    for (const name of names) {
      this.histories.set(name, [
        { role: "system", content: `You are agent ${name}. ${filler(name, 120)}` },
        { role: "user", content: `Task for ${name}: ${filler("task", 20)}` },
      ]);
    }
  }

  /** One turn of every program at once; each must be answered 200. */
  async turn(turn: number, maxTokens = 8): Promise<TurnResult[]> {
    const results = await Promise.all(this.names.map((name) => this.oneTurn(name, turn, maxTokens)));
    this.results.push(...results);
    return results;
  }

  private async oneTurn(name: string, turn: number, maxTokens: number): Promise<TurnResult> {
    const history = this.histories.get(name) as Message[];
    const stream = turn % 2 === 1;
    const response = await fetch(`${this.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Program-Id": name },
      body: JSON.stringify({
        messages: history,
        max_tokens: maxTokens,
        temperature: 0,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
    });
    const text = await response.text();
    assert.equal(response.status, 200, `${name} turn ${turn}: ${text.slice(0, 300)}`);
    const backend = response.headers.get("x-continuum-backend") ?? "";
    let content = "";
    let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | null = null;
    if (stream) {
      for (const frame of text.split("\n\n")) {
        const data = frame.replace(/^data: /, "").trim();
        if (data === "" || data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        assert.equal(chunk.error, undefined, `${name} turn ${turn}: ${data}`);
        content += chunk.choices?.[0]?.delta?.content ?? "";
        if (chunk.usage) usage = chunk.usage;
      }
    } else {
      const body = JSON.parse(text);
      content = body.choices[0].message.content ?? "";
      usage = body.usage;
    }
    assert.ok(usage, `${name} turn ${turn} reported no usage`);
    history.push(
      { role: "assistant", content },
      { role: "user", content: `tool output ${turn}: ${filler("out", 12)}` },
    );
    return {
      program: name,
      turn,
      backend,
      promptTokens: usage.prompt_tokens,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    };
  }

  /** The backends each program's turns went to, in turn order. */
  backendsOf(name: string): string[] {
    return this.results.filter((r) => r.program === name).map((r) => r.backend);
  }
}
