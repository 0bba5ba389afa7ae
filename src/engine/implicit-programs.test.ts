import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ImplicitPrograms } from "./implicit-programs.js";
import type { ContinuationTokenizer } from "./turn-continuation.js";

// Token ids are code points; EOT is a control token the template writes `<eot>`.
const EOT = 7;
const tokenizer: ContinuationTokenizer = {
  tokenizeContinuation: (text) => Int32Array.from(Array.from(text, (c) => c.codePointAt(0) as number)),
  templatePiece: (token) => Buffer.from(token === EOT ? "<eot>" : String.fromCodePoint(token), "utf8"),
  tokenPiece: (token) => Buffer.from(token === EOT ? "" : String.fromCodePoint(token), "utf8"),
};
const ids = (text: string) => Array.from(text, (c) => c.codePointAt(0) as number);
const BLOCK = 4;
const LIMITS = { maxTurns: 100, maxTokens: 10_000, turnsPerProgram: 4 };

/** A turn: `prompt` tokenized as its code points, the model answered `reply` then EOT. */
function turnIds(prompt: string, reply: string): number[] {
  return [...ids(prompt), ...ids(reply), EOT];
}

describe("ImplicitPrograms", () => {
  it("a prompt that repeats a turn's prompt and output continues its program, spliced onto the turn's ids", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    programs.remember("", "implicit-a", "Q:", turnIds("Q:", "abcde"), 2);
    const next = programs.continued("", "Q:abcde<eot>tool says 3", tokenizer);
    assert.equal(next?.programId, "implicit-a");
    assert.deepEqual(Array.from(next?.ids ?? []), [...turnIds("Q:", "abcde"), ...ids("tool says 3")]);
  });

  it("compares whole blocks: a change in the last partial block still continues, one before it does not", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    // 8 ids, 7 with KV: one whole block (Q, :, a, b)
    programs.remember("", "implicit-a", "Q:", turnIds("Q:", "abcde"), 2);
    assert.equal(programs.continued("", "Q:abXde<eot>more", tokenizer)?.programId, "implicit-a");
    assert.equal(programs.continued("", "Q:aXcde<eot>more", tokenizer), null);
  });

  it("a reply holding a control token the client never saw (the stream leaves it out) continues its program", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    programs.remember("", "implicit-a", "Q:", [...ids("Q:"), ...ids("ab"), EOT, ...ids("cde"), EOT], 2);
    const next = programs.continued("", "Q:abcde<eot>tool says 3", tokenizer);
    assert.equal(next?.programId, "implicit-a");
    assert.deepEqual(Array.from(next?.ids ?? []), [
      ...ids("Q:ab"),
      EOT,
      ...ids("cde"),
      EOT,
      ...ids("tool says 3"),
    ]);
  });

  it("an unrelated prompt, the same prompt with another reply, or a bare retry start no program", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    programs.remember("", "implicit-a", "Q: fix the test", turnIds("Q: fix the test", "ok"), 15);
    assert.equal(programs.continued("", "R: something else entirely", tokenizer), null);
    assert.equal(programs.continued("", "Q: fix the testno<eot>more", tokenizer), null);
    assert.equal(programs.continued("", "Q: fix the test", tokenizer), null);
  });

  it("a turn shorter than one block is never continued", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    programs.remember("", "implicit-a", "Q", turnIds("Q", "a"), 1);
    assert.equal(programs.continued("", "Qa<eot>more", tokenizer), null);
  });

  it("turns of another scope (tenant, cache salt) are never continued", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    programs.remember("tenant-1", "tenant-1/implicit-a", "Q:", turnIds("Q:", "abcde"), 2);
    assert.equal(programs.continued("tenant-2", "Q:abcde<eot>more", tokenizer), null);
    assert.equal(programs.continued("", "Q:abcde<eot>more", tokenizer), null);
    assert.equal(
      programs.continued("tenant-1", "Q:abcde<eot>more", tokenizer)?.programId,
      "tenant-1/implicit-a",
    );
  });

  it("a side request extending the conversation does not hide the turn the conversation goes on from", () => {
    const programs = new ImplicitPrograms(BLOCK, LIMITS);
    programs.remember("", "implicit-a", "Q:", turnIds("Q:", "abcde"), 2);
    const side = "Q:abcde<eot>who speaks next?";
    const sideTurn = programs.continued("", side, tokenizer);
    assert.equal(sideTurn?.programId, "implicit-a");
    const sidePrompt = Array.from(sideTurn?.ids ?? []);
    programs.remember("", "implicit-a", side, [...sidePrompt, ...ids("user"), EOT], sidePrompt.length);
    const main = programs.continued("", "Q:abcde<eot>tool output", tokenizer);
    assert.equal(main?.programId, "implicit-a");
    // the prompt repeating both, the side turn's output included, takes the furthest one
    const both = programs.continued("", `${side}user<eot>go on`, tokenizer);
    assert.equal(both?.ids.length, sidePrompt.length + 5 + ids("go on").length);
  });

  it("keeps a program's latest turns, the most recently used turns and tokens within bounds; an ended program goes", () => {
    const programs = new ImplicitPrograms(BLOCK, { maxTurns: 3, maxTokens: 40, turnsPerProgram: 2 });
    programs.remember("", "a", "A1:", turnIds("A1:", "xyz"), 3);
    programs.remember("", "a", "A2:", turnIds("A2:", "xyz"), 3);
    programs.remember("", "a", "A3:", turnIds("A3:", "xyz"), 3);
    assert.equal(programs.size, 2, "two turns per program");
    assert.equal(programs.continued("", "A1:xyz<eot>", tokenizer), null);
    programs.remember("", "b", "B1:", turnIds("B1:", "xyz"), 3);
    programs.remember("", "c", "C1:", turnIds("C1:", "xyz"), 3);
    assert.equal(programs.size, 3, "three turns in all, least recently used first out");
    assert.equal(programs.continued("", "A2:xyz<eot>", tokenizer), null);
    programs.remember("", "d", "D1:", turnIds("D1:", "x".repeat(30)), 3);
    assert.ok(programs.size <= 2, "40 token ids in all");
    programs.forgetProgram("", "d");
    assert.equal(programs.continued("", `D1:${"x".repeat(30)}<eot>`, tokenizer), null);
  });
});
