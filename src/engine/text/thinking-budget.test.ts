import assert from "node:assert/strict";
import { test } from "node:test";
import { ThinkingBudgetWatch } from "./thinking-budget.js";

const CLOSE = "\n</think>\n\n";
const CLOSED_BY = "</think>";
/** A tokenizer of code points, as the fake runner's. */
const tokenize = (text: string) => Int32Array.from(Array.from(text, (c) => c.codePointAt(0)!));

/** Feeds pieces one token each; the tokens the watch forced, in order. */
function run(watch: ThinkingBudgetWatch, pieces: readonly string[]): number[] {
  const forced: number[] = [];
  let text = "";
  for (const [i, piece] of pieces.entries()) {
    const expected = watch.forced;
    text += expected === null ? piece : String.fromCodePoint(expected);
    if (expected !== null) forced.push(expected);
    watch.afterToken(text, i + 1, tokenize);
  }
  return forced;
}

test("a spent budget writes its close token by token, then lets the model go on", () => {
  const watch = new ThinkingBudgetWatch({ tokens: 3, open: null, closedBy: CLOSED_BY, close: CLOSE });
  const forced = run(watch, [..."abcdefghijklmnopq"]);
  assert.equal(String.fromCodePoint(...forced), CLOSE);
  assert.equal(watch.forced, null, "nothing forced once the close is out");
});

test("thinking that must open first: forced only after the open tag, and never once closed", () => {
  const opensLate = new ThinkingBudgetWatch({
    tokens: 2,
    open: "<think>",
    closedBy: CLOSED_BY,
    close: CLOSE,
  });
  assert.deepEqual(run(opensLate, ["a", "b", "c"]), [], "no thinking opened, nothing forced");
  const opened = new ThinkingBudgetWatch({ tokens: 2, open: "<think>", closedBy: CLOSED_BY, close: CLOSE });
  assert.equal(String.fromCodePoint(...run(opened, ["<thi", "nk>", "x", ..."y".repeat(20)])), CLOSE);
  const closedInTime = new ThinkingBudgetWatch({
    tokens: 4,
    open: "<think>",
    closedBy: CLOSED_BY,
    close: CLOSE,
  });
  assert.deepEqual(run(closedInTime, ["<think>", "a</th", "ink>", "answer", ..."z".repeat(20)]), []);
});

test("harmony's analysis: forced to the final channel after the budget, never once the analysis ended", () => {
  const harmony = {
    tokens: 3,
    open: "<|channel|>analysis<|message|>",
    closedBy: "<|end|>",
    close: "<|end|><|start|>assistant<|channel|>final<|message|>",
  };
  const thinking = run(new ThinkingBudgetWatch(harmony), [
    "<|channel|>",
    "analysis",
    "<|message|>",
    ..."abcdefghijklmnopqrstuvwxyz0123456789".repeat(2),
  ]);
  assert.equal(String.fromCodePoint(...thinking), harmony.close);
  const called = [
    "<|channel|>analysis<|message|>",
    "a",
    "<|end|>",
    "<|start|>assistant to=functions.f",
    ..."x".repeat(9),
  ];
  assert.deepEqual(run(new ThinkingBudgetWatch(harmony), called), []);
});
