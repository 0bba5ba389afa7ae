import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../../core/rng.js";
import { type ChatMessage, renderChatML } from "../chat-template.js";
import { SpmTokenizer } from "./spm-tokenizer.js";
import { buildVocab, SPACE_MARK, TokenType } from "./vocab.js";

const vocab = buildVocab();
const tok = new SpmTokenizer(vocab);

/** Sample texts written for these tests (not drawn from the vocabulary's word lists). */
const ENGLISH = `When the team moved the service to a new data center last spring, nobody expected the
migration to take three months. The plan looked simple on paper: copy the databases, switch the traffic,
and turn off the old machines. In practice, every step revealed another hidden dependency. A nightly
report still read files from a shared folder that only existed in the old building, and a monitoring
script sent alerts to an email address that had been closed years ago. My grandmother grew tomatoes in a
small garden behind her house. Every summer she would give bags of them to the neighbors. Could you
summarize the main points of the report and suggest three changes we should make before the release?`;

const CODE = `export async function handleSearch(req: Request, res: Response): Promise<void> {
  const query = String(req.query.q ?? "").trim();
  if (query.length === 0) {
    res.status(400).json({ error: "missing query" });
    return;
  }
  const results: SearchResult[] = await searchIndex(query, { limit: 10 });
  res.json({ query, count: results.length, results });
}

def load_config(path):
    with open(path) as f:
        data = json.load(f)
    for key, value in data.items():
        print(f"{key} = {value}")
    return data
`;

describe("built-in vocabulary", () => {
  it("has the special, byte and ChatML tokens with the right types", () => {
    assert.equal(vocab.tokens.length, 8192);
    assert.equal(new Set(vocab.tokens).size, vocab.tokens.length);
    assert.equal(vocab.scores.length, vocab.tokens.length);
    assert.equal(vocab.types.length, vocab.tokens.length);
    assert.equal(vocab.tokens[vocab.unkId], "<unk>");
    assert.equal(vocab.types[vocab.unkId], TokenType.UNKNOWN);
    assert.equal(vocab.tokens[vocab.bosId], "<s>");
    assert.equal(vocab.tokens[vocab.eosId], "</s>");
    assert.deepEqual([vocab.unkId, vocab.bosId, vocab.eosId], [0, 1, 2]); // llama.cpp's SPM defaults
    assert.equal(vocab.tokens[vocab.imStartId], "<|im_start|>");
    assert.equal(vocab.tokens[vocab.imEndId], "<|im_end|>");
    for (const id of [vocab.bosId, vocab.eosId, vocab.imStartId, vocab.imEndId]) {
      assert.equal(vocab.types[id], TokenType.CONTROL);
    }
    for (let b = 0; b < 256; b++) {
      const id = vocab.byteBase + b;
      assert.equal(vocab.tokens[id], `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
      assert.equal(vocab.types[id], TokenType.BYTE);
    }
    const normal = vocab.types.filter((t) => t === TokenType.NORMAL).length;
    assert.equal(normal, 8192 - 3 - 256 - 2);
  });

  it("pieces keep token boundaries at newlines and before word-initial spaces", () => {
    vocab.tokens.forEach((t, id) => {
      if (vocab.types[id] !== TokenType.NORMAL) return;
      assert.ok(!t.includes("\n"), `piece ${JSON.stringify(t)} contains a newline`);
      assert.ok(!/[^▁]▁/.test(t), `piece ${JSON.stringify(t)} has a space mark after text`);
    });
  });

  it("reaches real models' vocabulary sizes with compounds of its pieces", () => {
    for (const size of [128256, 151936]) {
      const big = buildVocab({ size });
      assert.equal(big.tokens.length, size);
      assert.equal(new Set(big.tokens).size, size);
      assert.deepEqual(big.tokens.slice(0, 12000), buildVocab({ size: 16384 }).tokens.slice(0, 12000));
      big.tokens.forEach((t, id) => {
        if (big.types[id] !== TokenType.NORMAL) return;
        assert.ok(!t.includes("\n") && !/[^▁]▁/.test(t), `piece ${JSON.stringify(t)} breaks a boundary`);
      });
      const bigTok = new SpmTokenizer(big);
      for (const text of [ENGLISH, CODE]) {
        const ids = bigTok.tokenize(text);
        assert.equal(bigTok.detokenize(ids), text);
        assert.ok(ids.length <= tok.tokenize(text).length);
      }
    }
  });

  it("is deterministic and memoized", () => {
    assert.equal(buildVocab(), vocab);
    const again = buildVocab({ size: 4096 });
    assert.equal(again.tokens.length, 4096);
    assert.deepEqual(again.tokens.slice(0, 1000), buildVocab({ size: 8192 }).tokens.slice(0, 1000));
    // merged pieces are ranked by score
    const scores = vocab.scores.filter((_, i) => vocab.types[i] === TokenType.NORMAL);
    for (let i = 1; i < scores.length; i++) assert.ok(scores[i]! < scores[i - 1]!);
  });
});

describe("SpmTokenizer", () => {
  it("tokenizes English at about 4 characters per token and code at about 3", () => {
    const en = ENGLISH.length / tok.tokenize(ENGLISH).length;
    const code = CODE.length / tok.tokenize(CODE).length;
    assert.ok(en >= 3.7 && en <= 5, `English: ${en.toFixed(2)} chars/token`);
    assert.ok(code >= 2.5 && code <= 4, `code: ${code.toFixed(2)} chars/token`);
  });

  it("adds the space prefix, marks spaces and falls back to bytes", () => {
    const ids = tok.tokenize("the cat");
    assert.deepEqual(
      ids.map((i) => vocab.tokens[i]),
      ["▁the", "▁cat"],
    );
    const nl = tok.tokenize("a\nb");
    assert.ok(nl.includes(vocab.byteBase + 0x0a));
    const ja = tok.tokenize("日");
    assert.deepEqual(
      ja.slice(1),
      [0xe6, 0x97, 0xa5].map((b) => vocab.byteBase + b),
    );
    assert.deepEqual(tok.tokenize(""), []);
    assert.deepEqual(tok.tokenize("", { addBos: true }), [vocab.bosId]);
  });

  it("parses ChatML special tokens only when asked", () => {
    const ids = tok.tokenize("<|im_start|>user\nhi<|im_end|>\n");
    assert.equal(ids[0], vocab.imStartId);
    assert.ok(ids.includes(vocab.imEndId));
    assert.equal(vocab.tokens[ids[1]!], `${SPACE_MARK}user`);
    const raw = tok.tokenize("<|im_start|>", { parseSpecial: false });
    assert.ok(!raw.includes(vocab.imStartId));
  });

  it("round-trips text through detokenize", () => {
    for (const text of [
      ENGLISH,
      CODE,
      "naïve café — “quoted” 日本語 🎉",
      "  two leading spaces",
      "tabs\tand\nlines\n",
    ]) {
      assert.equal(tok.detokenize(tok.tokenize(text)), text);
    }
  });

  it("keeps the tokens of a conversation a prefix of the tokens of its continuation", () => {
    for (const t of [tok, new SpmTokenizer(buildVocab({ size: 151936 }))]) assertPrefixStable(t);
  });
});

/** Asserts that tokenizing a growing random conversation only ever appends tokens. */
function assertPrefixStable(tokenizer: SpmTokenizer): void {
  const rng = new Rng(5);
  const words = ENGLISH.split(/\s+/).concat(CODE.split(/(?=\n)| /));
  const content = () => {
    let s = "";
    const n = rng.int(1, 40);
    for (let i = 0; i < n; i++) s += (i > 0 && rng.next() < 0.8 ? " " : "") + rng.pick(words);
    return s;
  };
  const isPrefix = (a: number[], b: number[]) => a.length <= b.length && a.every((x, i) => x === b[i]);
  for (let c = 0; c < 30; c++) {
    const messages: ChatMessage[] = [{ role: "system", content: content() }];
    let previous = tokenizer.tokenize(renderChatML(messages, false), { addBos: true });
    for (let turn = 0; turn < 6; turn++) {
      messages.push({ role: rng.next() < 0.3 ? "tool" : "user", content: content() });
      const prompt = tokenizer.tokenize(renderChatML(messages, true), { addBos: true });
      assert.ok(isPrefix(previous, prompt));
      messages.push({ role: "assistant", content: content() });
      const full = tokenizer.tokenize(renderChatML(messages, false), { addBos: true });
      assert.ok(isPrefix(prompt, full));
      previous = full;
    }
  }
}
