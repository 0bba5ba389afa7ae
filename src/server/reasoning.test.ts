import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { promptOpensThinking, ReasoningStream, splitReasoning } from "./reasoning.js";

const pieceArb = fc.constantFrom(
  "<think>",
  "</think>",
  "\n",
  " ",
  "<",
  "</",
  "thi",
  "nk>",
  "I think",
  "ok",
  "é",
);

/** The output cut into random pieces, as deltas arrive. */
function streamed(text: string, cuts: number[], insideThinking: boolean | null) {
  const stream = new ReasoningStream(insideThinking);
  const points = [0, ...cuts.filter((c) => c > 0 && c < text.length).sort((a, b) => a - b), text.length];
  let reasoning = "";
  let answer = "";
  for (let i = 1; i < points.length; i++) {
    const out = stream.push(text.slice(points[i - 1], points[i]));
    reasoning += out.reasoning;
    answer += out.answer;
  }
  const end = stream.finish();
  return {
    reasoning: reasoning + end.reasoning,
    answer: answer + end.answer,
    answerStart: stream.answerStart,
  };
}

describe("reasoning apart from the answer", () => {
  test("a Qwen3 output, one opened by the prompt (DeepSeek-R1), none, and an unfinished one", () => {
    const qwen = "<think>\nList first.\n</think>\n\nHere.";
    assert.deepEqual(splitReasoning(qwen, false), {
      reasoning: "List first.",
      answerStart: qwen.indexOf("Here"),
    });
    assert.deepEqual(splitReasoning("List first.\n</think>\n\nHere.", true).reasoning, "List first.");
    assert.deepEqual(splitReasoning("Here.", false), { reasoning: null, answerStart: 0 });
    assert.deepEqual(splitReasoning("<think>\nStill going", false), {
      reasoning: "Still going",
      answerStart: 19,
    });
    assert.equal(promptOpensThinking("<|im_start|>assistant\n<think>\n"), true);
    assert.equal(promptOpensThinking("<think>\n\n</think>\n\n"), false);
  });

  test("streamed in any pieces, the same thinking and answer as split whole", () => {
    fc.assert(
      fc.property(
        fc.array(pieceArb, { maxLength: 14 }),
        fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 10 }),
        fc.constantFrom(true, false, null),
        (pieces, cuts, insideThinking) => {
          const text = pieces.join("");
          const whole = splitReasoning(text, insideThinking);
          const stream = streamed(text, cuts, insideThinking);
          assert.equal(stream.reasoning.trim(), whole.reasoning ?? "", JSON.stringify(text));
          assert.equal(stream.answer, text.slice(whole.answerStart), JSON.stringify(text));
          if (stream.answer.length > 0) assert.equal(stream.answerStart, whole.answerStart);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
