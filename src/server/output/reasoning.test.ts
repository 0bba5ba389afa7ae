import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import { llamaTemplate } from "../test-support/llama-templates.js";
import {
  AnswerEndStream,
  answerEnd,
  promptOpensThinking,
  ReasoningStream,
  splitReasoning,
  THINK_TAGS,
  type ThinkTags,
  thinkTagsOf,
} from "./reasoning.js";

const SEED: ThinkTags = { open: "<seed:think>", close: "</seed:think>" };
const MISTRAL: ThinkTags = { open: "[THINK]", close: "[/THINK]" };
const KIMI_K3: ThinkTags = {
  open: "<|open|>think<|sep|>",
  close: "<|close|>think<|sep|>",
  answer: { open: "<|open|>response<|sep|>", close: "<|close|>response<|sep|>" },
};

/** Pieces of an output: the tags, their beginnings and ends, and text. */
const piecesOf = ({ open, close, answer }: ThinkTags) =>
  fc.constantFrom(
    open,
    close,
    "\n",
    " ",
    open.slice(0, 2),
    close.slice(0, 3),
    close.slice(3),
    "I think",
    "ok",
    "é",
    ...(answer?.open ? [answer.open, answer.open.slice(0, 4), answer.open.slice(4)] : []),
  );

/** The output cut into random pieces, as deltas arrive. */
function streamed(text: string, cuts: number[], insideThinking: boolean | null, tags: ThinkTags) {
  const stream = new ReasoningStream(insideThinking, tags);
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

describe("AnswerEndStream", () => {
  test("in any pieces, the content up to the closing tag and nothing after it", () => {
    const close = "<|close|>response<|sep|>";
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(close, close.slice(0, 5), close.slice(5), "a", "<|", " b"), {
          maxLength: 12,
        }),
        fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 8 }),
        (pieces, cuts) => {
          const text = pieces.join("");
          const points = [
            0,
            ...cuts.filter((c) => c > 0 && c < text.length).sort((a, b) => a - b),
            text.length,
          ];
          const stream = new AnswerEndStream(close);
          let out = "";
          for (let i = 1; i < points.length; i++) out += stream.push(text.slice(points[i - 1], points[i]));
          const end = text.indexOf(close);
          if (end !== -1) assert.equal(out, text.slice(0, end));
          else
            assert.ok(text.startsWith(out) && text.length - out.length < close.length, JSON.stringify(text));
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("reasoning apart from the answer", () => {
  test("a Qwen3 output, one opened by the prompt (DeepSeek-R1), none, and an unfinished one", () => {
    const qwen = "<think>\nList first.\n</think>\n\nHere.";
    assert.deepEqual(splitReasoning(qwen, false, THINK_TAGS), {
      reasoning: "List first.",
      answerStart: qwen.indexOf("Here"),
    });
    assert.deepEqual(
      splitReasoning("List first.\n</think>\n\nHere.", true, THINK_TAGS).reasoning,
      "List first.",
    );
    assert.deepEqual(splitReasoning("Here.", false, THINK_TAGS), { reasoning: null, answerStart: 0 });
    assert.deepEqual(splitReasoning("<think>\nStill going", false, THINK_TAGS), {
      reasoning: "Still going",
      answerStart: 19,
    });
    assert.equal(promptOpensThinking("<|im_start|>assistant\n<think>\n", THINK_TAGS), true);
    assert.equal(promptOpensThinking("<think>\n\n</think>\n\n", THINK_TAGS), false);
  });

  test("each model family's tags, told from its template", () => {
    const tags = (name: string) => thinkTagsOf(llamaTemplate(name));
    assert.deepEqual(tags("Qwen-Qwen3-0.6B"), THINK_TAGS);
    assert.deepEqual(tags("ByteDance-Seed-OSS"), SEED);
    assert.deepEqual(tags("tencent-Hy3"), { open: "<think:opensource>", close: "</think:opensource>" });
    assert.deepEqual(tags("MiniMax-M3"), { open: "<mm:think>", close: "</mm:think>" });
    assert.deepEqual(tags("mistralai-Ministral-3-14B-Reasoning-2512"), MISTRAL);
    assert.deepEqual(tags("CohereForAI-c4ai-command-r7b-12-2024-tool_use"), {
      open: "<|START_THINKING|>",
      close: "<|END_THINKING|>",
    });
    assert.equal(tags("Qwen-Qwen2.5-7B-Instruct"), null);
    assert.deepEqual(tags("Kimi-K3"), KIMI_K3);
    // Kimi K3's answer comes in its response section: the opening tag is left out, the closing one ends it
    const kimi =
      "Plan.<|close|>think<|sep|><|open|>response<|sep|>Hi.<|close|>response<|sep|><|close|>message<|sep|>";
    const split = splitReasoning(kimi, true, KIMI_K3);
    assert.equal(split.reasoning, "Plan.");
    assert.equal(kimi.slice(split.answerStart, answerEnd(kimi, split.answerStart, KIMI_K3)), "Hi.");
    const apriel = tags("Apriel-1.6-15b-Thinker-fixed")!;
    assert.equal(apriel.close, "[BEGIN FINAL RESPONSE]");
    // its generation prompt opens the thinking
    assert.equal(promptOpensThinking("<|begin_assistant|>\nHere are my reasoning steps:\n", apriel), true);
    assert.deepEqual(splitReasoning("Add them.\n[BEGIN FINAL RESPONSE]\n4", true, apriel), {
      reasoning: "Add them.",
      answerStart: 33,
    });
    // Seed-OSS's own tags split its output; <think> in it is text
    const seed = "<seed:think>Plan <think> it.</seed:think>\nDone.";
    assert.deepEqual(splitReasoning(seed, false, SEED), {
      reasoning: "Plan <think> it.",
      answerStart: seed.indexOf("Done"),
    });
    assert.equal(splitReasoning(seed, false, THINK_TAGS).reasoning, null);
  });

  test("streamed in any pieces, the same thinking and answer as split whole, for any family's tags", () => {
    const tagsArb = fc.constantFrom(THINK_TAGS, SEED, MISTRAL, KIMI_K3);
    fc.assert(
      fc.property(
        tagsArb.chain((tags) => fc.tuple(fc.constant(tags), fc.array(piecesOf(tags), { maxLength: 14 }))),
        fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 10 }),
        fc.constantFrom(true, false, null),
        ([tags, pieces], cuts, insideThinking) => {
          const text = pieces.join("");
          const whole = splitReasoning(text, insideThinking, tags);
          const stream = streamed(text, cuts, insideThinking, tags);
          assert.equal(stream.reasoning.trim(), whole.reasoning ?? "", JSON.stringify(text));
          assert.equal(stream.answer, text.slice(whole.answerStart), JSON.stringify(text));
          if (stream.answer.length > 0) assert.equal(stream.answerStart, whole.answerStart);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
