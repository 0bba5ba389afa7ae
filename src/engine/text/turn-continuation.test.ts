import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ContinuationTokenizer, endsInsideCharacter, TurnContinuations } from "./turn-continuation.js";

// A tokenizer whose token ids are code points, with two control tokens written `<eot>` and `<s>` by the
// template (and streamed as nothing) and ids >= 1000 standing for pieces of several characters.
const EOT = 7;
const BOS = 1;
const CONTROL = new Map<number, string>([
  [EOT, "<eot>"],
  [BOS, "<s>"],
]);
const PIECES = new Map<number, string>([
  [1000, "ab"],
  [1001, "é"],
]);
const tokenizer: ContinuationTokenizer = {
  tokenizeContinuation: (text) => Int32Array.from(Array.from(text, (c) => c.codePointAt(0) as number)),
  templatePiece: (token) =>
    Buffer.from(CONTROL.get(token) ?? PIECES.get(token) ?? String.fromCodePoint(token), "utf8"),
  tokenPiece: (token) =>
    Buffer.from(CONTROL.has(token) ? "" : (PIECES.get(token) ?? String.fromCodePoint(token)), "utf8"),
};
const ids = (text: string) => Array.from(text, (c) => c.codePointAt(0) as number);

describe("TurnContinuations", () => {
  it("keeps the last prompt's ids and the generated tokens the new prompt repeats, then tokenizes the rest", () => {
    const turns = new TurnContinuations(1000);
    // the prompt "Q:" was tokenized with a BOS (id 1) the text does not show; the model answered "ab" + <eot>
    turns.remember("p", "Q:", [1, ...ids("Q:"), 1000, EOT], 3);
    const spliced = turns.splice("p", "Q:ab<eot>next", tokenizer);
    assert.deepEqual(Array.from(spliced ?? []), [1, ...ids("Q:"), 1000, EOT, ...ids("next")]);
  });

  it("stops at the first generated token the prompt does not repeat", () => {
    const turns = new TurnContinuations(1000);
    turns.remember("p", "Q:", [...ids("Q:"), 1000, ...ids("cd"), EOT], 2);
    // the client sent the reply back trimmed differently: "ab" then "xd"
    assert.deepEqual(Array.from(turns.splice("p", "Q:abxd", tokenizer) ?? []), [
      ...ids("Q:"),
      1000,
      ...ids("xd"),
    ]);
  });

  it("never ends the kept tokens inside a character", () => {
    const turns = new TurnContinuations(1000);
    // "é" generated as two byte tokens (0xC3, 0xA9 as ids 2000/2001), the second differing from the prompt's
    const split: ContinuationTokenizer = {
      ...tokenizer,
      templatePiece: (t) =>
        t === 2000 ? Buffer.from([0xc3]) : t === 2001 ? Buffer.from([0xa8]) : tokenizer.templatePiece(t),
    };
    turns.remember("p", "Q:", [...ids("Q:"), 2000, 2001], 2);
    assert.deepEqual(Array.from(turns.splice("p", "Q:é!", split) ?? []), [...ids("Q:"), ...ids("é!")]);
  });

  it("matches bytes that are no UTF-8 as the client received them, U+FFFD, and keeps their tokens", () => {
    const turns = new TurnContinuations(1000);
    // a sampled byte token 0xFF (id 2002) and a lone lead byte 0xC3 (id 2000) followed by "ab": the server
    // streamed "\uFFFD" for each, and the client sends that text back
    const bytes: ContinuationTokenizer = {
      ...tokenizer,
      templatePiece: (t) =>
        t === 2002 ? Buffer.from([0xff]) : t === 2000 ? Buffer.from([0xc3]) : tokenizer.templatePiece(t),
    };
    turns.remember("p", "Q:", [...ids("Q:"), 2002, 1000, 2000, 1000, EOT], 2);
    const spliced = turns.splice("p", "Q:\uFFFDab\uFFFDab<eot>next", bytes);
    assert.deepEqual(Array.from(spliced ?? []), [...ids("Q:"), 2002, 1000, 2000, 1000, EOT, ...ids("next")]);
  });

  it("keeps a control token sampled mid-reply that the stream left out and the client could not send back", () => {
    const turns = new TurnContinuations(1000);
    // the model answered "ab" <s> "cd" <eot>; the client received "abcd"
    turns.remember("p", "Q:", [...ids("Q:"), 1000, BOS, ...ids("cd"), EOT], 2);
    assert.deepEqual(Array.from(turns.splice("p", "Q:abcd<eot>next", tokenizer) ?? []), [
      ...ids("Q:"),
      1000,
      BOS,
      ...ids("cd"),
      EOT,
      ...ids("next"),
    ]);
    // a client that received the control token's text (skip_special_tokens: false) sends it back
    turns.remember("p", "Q:", [...ids("Q:"), 1000, BOS, ...ids("cd"), EOT], 2);
    assert.deepEqual(Array.from(turns.splice("p", "Q:ab<s>cd<eot>", tokenizer) ?? []), [
      ...ids("Q:"),
      1000,
      BOS,
      ...ids("cd"),
      EOT,
    ]);
  });

  it("does not keep a last token the template closes the reply with in its own way", () => {
    const turns = new TurnContinuations(1000);
    // the reply ended on <s> (as an end of generation); the template wrote "|" after the reply instead
    turns.remember("p", "Q:", [...ids("Q:"), 1000, BOS], 2);
    assert.deepEqual(Array.from(turns.splice("p", "Q:ab|next", tokenizer) ?? []), [
      ...ids("Q:"),
      1000,
      ...ids("|next"),
    ]);
  });

  it("leaves a prompt that does not extend the last one to ordinary tokenization", () => {
    const turns = new TurnContinuations(1000);
    turns.remember("p", "Q: one", ids("Q: one"), 6);
    assert.equal(turns.splice("p", "Q: two and more", tokenizer), null);
    assert.equal(turns.splice("p", "Q:", tokenizer), null);
    assert.equal(turns.splice("other", "Q: one more", tokenizer), null);
  });

  it("keeps at most maxTokens ids, dropping the least recently used programs", () => {
    const turns = new TurnContinuations(10);
    turns.remember("a", "aaaa", ids("aaaa"), 4);
    turns.remember("b", "bbbb", ids("bbbb"), 4);
    assert.notEqual(turns.splice("a", "aaaa!", tokenizer), null); // a is now the most recent
    turns.remember("c", "cccc", ids("cccc"), 4);
    assert.equal(turns.size, 2);
    assert.equal(turns.splice("b", "bbbb!", tokenizer), null);
    assert.notEqual(turns.splice("a", "aaaa!", tokenizer), null);
    turns.remember("huge", "x", ids("x".repeat(11)), 1);
    assert.equal(turns.splice("huge", "x!", tokenizer), null);
  });
});

describe("endsInsideCharacter", () => {
  it("is true only for a lead byte followed by fewer valid continuation bytes than it needs", () => {
    assert.equal(endsInsideCharacter([0x61]), false);
    assert.equal(endsInsideCharacter([0xc3]), true);
    assert.equal(endsInsideCharacter([0xc3, 0xa9]), false);
    assert.equal(endsInsideCharacter([0xe2, 0x96]), true); // "▁" needs a third byte
    assert.equal(endsInsideCharacter([0xe0, 0x80]), false); // E0 needs A0..BF next: already replaced
    assert.equal(endsInsideCharacter([0xf0, 0x9f, 0x98]), true);
    assert.equal(endsInsideCharacter([0xff]), false);
    assert.equal(endsInsideCharacter([0x80, 0x80, 0x80]), false);
  });
});
