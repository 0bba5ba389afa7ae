import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EventChannel } from "../event-channel.js";
import { OutputText } from "./output-text.js";

const bytes = (s: string) => Buffer.from(s, "utf8");

/** Feeds pieces; returns the streamed deltas, the final text and whether a stop string ended it. */
function feed(stops: string[], pieces: (string | Uint8Array)[]) {
  const out = new OutputText(stops);
  let streamed = "";
  let stopped = false;
  for (const p of pieces) {
    const r = out.push(typeof p === "string" ? bytes(p) : p);
    streamed += r.delta;
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  if (!stopped) streamed += out.finish();
  return { streamed, text: out.text, stopped };
}

describe("OutputText", () => {
  test("before min_tokens, text goes out whole and no stop string is looked for in it, even one it ends with half of", () => {
    const out = new OutputText(["STOP"]);
    assert.deepEqual(out.push(bytes("a STOP b ST"), false), { delta: "a STOP b ST", stopped: false });
    // "ST" is out already: "OP" completes no stop string, and a later one still ends the text
    assert.deepEqual(out.push(bytes("OP c"), true), { delta: "OP c", stopped: false });
    assert.deepEqual(out.push(bytes(" STOP d"), true), { delta: " ", stopped: true });
    assert.equal(out.text, "a STOP b STOP c ");
  });

  test("a stop string split across tokens ends the text before it and is never streamed", () => {
    const r = feed(["</tool_call>"], ["call: ", "ls", "</to", "ol_c", "all>", " more"]);
    assert.deepEqual(r, { streamed: "call: ls", text: "call: ls", stopped: true });
  });

  test("text that only looked like a stop string's start is released", () => {
    const out = new OutputText(["STOP"]);
    assert.equal(out.push(bytes("go ST")).delta, "go ");
    assert.equal(out.push(bytes("ART")).delta, "START");
    assert.equal(out.finish(), "");
    assert.equal(out.text, "go START");
  });

  test("the earliest of several stop strings wins, and is named", () => {
    const r = feed(["bb", "a"], ["xxbb", "a"]);
    assert.equal(r.text, "xx");
    const out = new OutputText(["bb", "x"]);
    out.push(bytes("abbx"));
    assert.equal(out.stopString, "bb");
    assert.equal(new OutputText(["bb"]).stopString, null);
  });

  test("UTF-8 characters split across tokens are held until whole", () => {
    const smile = bytes("🙂");
    const out = new OutputText([]);
    assert.equal(out.push(bytes("hi ")).delta, "hi ");
    assert.equal(out.push(smile.subarray(0, 2)).delta, "");
    assert.equal(out.push(smile.subarray(2)).delta, "🙂");
    assert.equal(out.text, "hi 🙂");
  });

  test("finish flushes held text; an incomplete character becomes U+FFFD", () => {
    const out = new OutputText(["END"]);
    assert.equal(out.push(bytes("abc E")).delta, "abc ");
    assert.equal(out.push(bytes("é").subarray(0, 1)).delta, "");
    assert.equal(out.finish(), "E\uFFFD");
  });
});

describe("EventChannel", () => {
  test("queued values, then the end; early return cancels once", async () => {
    let cancels = 0;
    const ch = new EventChannel<number>(() => cancels++);
    ch.push(1);
    ch.push(2);
    const it = ch[Symbol.asyncIterator]();
    assert.deepEqual(await it.next(), { value: 1, done: false });
    const pending = it.next();
    assert.deepEqual(await pending, { value: 2, done: false });
    const waiting = it.next();
    ch.push(3);
    assert.deepEqual(await waiting, { value: 3, done: false });
    await it.return?.();
    await it.return?.();
    assert.equal(cancels, 1);
    ch.push(4);
    assert.deepEqual(await it.next(), { value: undefined, done: true });
  });

  test("fail rejects after the queued values", async () => {
    const ch = new EventChannel<string>();
    ch.push("a");
    ch.fail(new Error("boom"));
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const v of ch) seen.push(v);
    }, /boom/);
    assert.deepEqual(seen, ["a"]);
  });
});
