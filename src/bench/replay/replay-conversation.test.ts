import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Rng } from "../../core/rng.js";
import { renderChatML } from "../../gguf/index.js";
import { generateWorkload } from "../../workload/generators.js";
import type { TraceProgram } from "../../workload/trace.js";
import { scaleTokens } from "../../workload/transforms.js";
import { ReplayConversation } from "./replay-conversation.js";
import {
  builtinTokenCounter,
  CharsTokenCounter,
  promptTokens,
  type ReplayMessage,
  type TokenCounter,
} from "./replay-tokens.js";
import { REPLAY_WORDS } from "./replay-words.js";

const spm = builtinTokenCounter();

/** A stand-in for the server's reply: seeded words, about `tokens` tokens. */
function fakeReply(rng: Rng, tokens: number): string {
  const words: string[] = [];
  for (let i = 0; i < Math.max(1, Math.round(tokens * 0.8)); i++) words.push(rng.pick(REPLAY_WORDS));
  return words.join(" ");
}

interface Turn {
  messages: ReplayMessage[];
  tokens: number;
  target: number;
  kept: number;
  elided: number;
  reply: string;
}

function replay(program: TraceProgram, counter: TokenCounter, seed = 1): Turn[] {
  const conversation = new ReplayConversation({ programKey: program.id, seed, counter });
  const rng = new Rng(99);
  return program.turns.map((turn) => {
    const p = conversation.prompt(turn);
    const reply = fakeReply(rng, turn.output);
    conversation.addReply(reply);
    return {
      messages: p.messages,
      tokens: p.tokens,
      target: p.targetTokens,
      kept: p.keptPrefixTokens,
      elided: p.elided,
      reply,
    };
  });
}

const isPrefix = (a: readonly number[], b: readonly number[]) =>
  a.length <= b.length && a.every((x, i) => x === b[i]);

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe("synthetic replay conversation", () => {
  const programs = scaleTokens(generateWorkload({ kind: "swe-bench", programs: 4, seed: 3 }), 0.03);

  test("built-in tokenizer: every prompt has the trace's token count (exactly, as the server counts)", () => {
    for (const program of programs) {
      for (const turn of replay(program, spm)) {
        const ids = spm.promptIds(turn.messages);
        assert.equal(ids.length, turn.tokens, "the counter's sum equals tokenizing the rendered prompt");
        // Exact, unless the reply alone already overshot (then the new message is a single word).
        const single = !/\s/.test(turn.messages.at(-1)!.content);
        assert.ok(
          turn.tokens === turn.target || (turn.tokens > turn.target && single),
          `${turn.tokens} tokens for a target of ${turn.target}`,
        );
      }
    }
  });

  test("each prompt extends the previous prompt + reply token for token", () => {
    for (const program of programs) {
      const turns = replay(program, spm);
      for (let i = 1; i < turns.length; i++) {
        const prev = turns[i - 1]!;
        const held = spm.promptIds([...prev.messages, { role: "assistant", content: prev.reply }], false);
        const prompt = spm.promptIds(turns[i]!.messages);
        assert.ok(isPrefix(held, prompt), `turn ${i} of ${program.id} keeps the previous context`);
        assert.equal(turns[i]!.kept, held.length);
        assert.equal(turns[i]!.elided, 0);
      }
    }
  });

  test("an elided history breaks the prefix about where the trace's cached count says", () => {
    // SWE-agent style: turn 3 keeps only ~40% of the context it had.
    const program: TraceProgram = {
      id: "elide",
      turns: [
        { input: 300, cached: 0, output: 20, tool: "ls", toolS: 0.1 },
        { input: 600, cached: 320, output: 20, tool: "grep", toolS: 0.1 },
        { input: 900, cached: 620, output: 20, tool: "cat", toolS: 0.1 },
        { input: 700, cached: 380, output: 20, tool: null, toolS: null },
      ],
    };
    const turns = replay(program, spm);
    const prev = turns[2]!;
    const last = turns[3]!;
    assert.ok(last.elided >= 1);
    const held = spm.promptIds([...prev.messages, { role: "assistant", content: prev.reply }], false);
    const shared = commonPrefix(held, spm.promptIds(last.messages));
    assert.ok(shared < held.length - 100, "the prefix breaks before the end of the held context");
    assert.ok(Math.abs(shared - 380) < 120, `prefix of ${shared} tokens kept for a cached count of 380`);
    assert.ok(Math.abs(last.tokens - 700) <= 1);
    assert.match(last.messages.map((m) => m.content).join("\n"), /Old tool output: \(\d+ lines omitted\)/);
  });

  test("the same program and seed give the same messages; other seeds or programs differ", () => {
    const program = programs[0]!;
    const a = replay(program, spm, 7).map((t) => t.messages);
    const b = replay(program, spm, 7).map((t) => t.messages);
    assert.deepEqual(a, b);
    assert.notDeepEqual(replay(program, spm, 8)[0]!.messages, a[0]);
    assert.notDeepEqual(replay({ ...program, id: "other" }, spm, 7)[0]!.messages, a[0]);
  });

  test("chars/token estimate: prompts meet the targets by its own count, lengths scale with the ratio", () => {
    const chars = new CharsTokenCounter(4);
    for (const program of programs) {
      for (const turn of replay(program, chars)) {
        assert.equal(promptTokens(chars, turn.messages), turn.tokens);
        assert.ok(Math.abs(turn.tokens - turn.target) <= 2, `${turn.tokens} vs ${turn.target}`);
        const text = renderChatML(turn.messages);
        assert.ok(Math.abs(text.length / 4 - turn.target) < 0.2 * turn.target + 20);
      }
    }
  });

  test("a reply must be recorded before the next prompt", () => {
    const conversation = new ReplayConversation({ programKey: "p", seed: 1, counter: spm });
    conversation.prompt({ input: 50, cached: 0, output: 5, tool: "ls", toolS: 0 });
    assert.throws(() => conversation.prompt({ input: 80, cached: 55, output: 5, tool: null, toolS: null }));
  });
});
