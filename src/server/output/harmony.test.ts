/**
 * gpt-oss's harmony output read as every API reports it: the analysis channel as thinking, the final
 * channel as the answer, commentary messages to functions as calls; whole and streamed (fast-check: any
 * chunking gives what the whole output gives); through the server with the model's own template.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import type { ModelChatTemplate } from "../../engine/engine-api.js";
import { llamaTemplate, qwen3ChatTemplate } from "../test-support/llama-templates.js";
import { type Json, sseEvents, withServer } from "../test-support/test-server.js";
import { readOutput } from "./chat-output.js";
import { HARMONY_MESSAGES } from "./harmony.js";
import { MessageStream } from "./output-messages.js";
import { THINK_TAGS } from "./reasoning.js";

const BASH = { name: "bash", parameters: null };
const ANALYSIS = "<|channel|>analysis<|message|>Need to list.<|end|>";
const CALL =
  '<|start|>assistant to=functions.bash<|channel|>commentary <|constrain|>json<|message|>{"command":"ls"}';
const FINAL = "<|start|>assistant<|channel|>final<|message|>Here they are.";

/** A finished output as the server reads gpt-oss's, its thinking split. */
function readHarmony(text: string, offered: (typeof BASH)[], parallel: boolean) {
  const tools = { parseFor: offered, rendered: [], grammar: null, parallel, replies: null };
  return readOutput(text, { tools, format: "harmony", insideThinking: false, thinkTags: THINK_TAGS }, false);
}

describe("readHarmony", () => {
  test("thinking, answer, calls; a preamble with the thinking; an unknown function left out", () => {
    const answered = readHarmony(`${ANALYSIS}${FINAL}`, [BASH], true);
    assert.equal(answered.reasoning, "Need to list.");
    assert.equal(answered.content, "Here they are.");
    assert.deepEqual(answered.calls, []);
    assert.equal(`${ANALYSIS}${FINAL}`.slice(answered.answerStart, answered.contentEnd), "Here they are.");

    const called = readHarmony(`${ANALYSIS}${CALL}`, [BASH], true);
    assert.equal(called.reasoning, "Need to list.");
    assert.equal(called.content, null);
    assert.deepEqual(
      called.calls.map((c) => [c.name, JSON.parse(c.arguments)]),
      [["bash", { command: "ls" }]],
    );

    // the call written in the header's other place (before the channel), after a preamble
    const preamble = "<|channel|>commentary<|message|>Listing now.<|end|>";
    const other =
      '<|start|>assistant<|channel|>commentary to=functions.bash json<|message|>{"command":"pwd"}';
    const both = readHarmony(`${preamble}${other}`, [BASH], true);
    assert.equal(both.reasoning, "Listing now.");
    assert.equal(JSON.parse(both.calls[0]!.arguments).command, "pwd");
    assert.deepEqual(readHarmony(`${ANALYSIS}${CALL}`, [], true).calls, [], "a function not offered");
  });

  test("an output without harmony messages is all answer; one cut in a header has its messages so far", () => {
    assert.deepEqual(readHarmony("plain text", [BASH], true), {
      reasoning: null,
      content: "plain text",
      calls: [],
      answerStart: 0,
      contentEnd: 10,
    });
    const cut = readHarmony(`${ANALYSIS}<|start|>assistant<|chan`, [BASH], true);
    assert.equal(cut.reasoning, "Need to list.");
    assert.equal(cut.content, null);
  });
});

describe("harmony's messages streamed", () => {
  const outputs = [
    `${ANALYSIS}${FINAL}`,
    `${ANALYSIS}${CALL}`,
    `<|channel|>commentary<|message|>Pre <|amble|>.<|end|>${FINAL}`,
    "<|channel|>final<|message|>Only <b>an</b> answer",
    `${ANALYSIS}<|start|>assistant<|channel|>fin`,
  ];
  test("any chunking streams what the whole output reads as", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...outputs),
        fc.array(fc.integer({ min: 1, max: 60 }), { minLength: 1 }),
        (text, cuts) => {
          const stream = new MessageStream(HARMONY_MESSAGES);
          let reasoning = "";
          let answer = "";
          let at = 0;
          for (const size of cuts) {
            const piece = stream.push(text.slice(at, at + size));
            reasoning += piece.reasoning;
            answer += piece.answer;
            at += size;
            if (at >= text.length) break;
          }
          if (at < text.length) {
            const rest = stream.push(text.slice(at));
            reasoning += rest.reasoning;
            answer += rest.answer;
          }
          const end = stream.finish();
          reasoning += end.reasoning;
          answer += end.answer;
          const whole = readHarmony(text, [BASH], true);
          assert.equal(reasoning.trim(), whole.reasoning ?? "");
          assert.equal(answer, whole.content ?? "");
          if (whole.content !== null) assert.equal(stream.answerStart, whole.answerStart);
          assert.ok(!`${reasoning}${answer}`.includes("<|end|>"), "no control token in what streams");
        },
      ),
      { numRuns: 300 },
    );
  });
});

const gptOss: ModelChatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate("openai-gpt-oss-120b") };
const tools = [
  {
    type: "function",
    function: { name: "bash", parameters: { type: "object", properties: { command: { type: "string" } } } },
  },
];

describe("gpt-oss through the server (its own template, the fake engine)", () => {
  test("chat completions: reasoning_content, tool calls, then the answer; whole and streamed", async () => {
    const replies = [`${ANALYSIS}${CALL}`, `${ANALYSIS}${FINAL}`];
    let turn = 0;
    await withServer({ chatTemplate: gptOss, reply: () => replies[turn++ % 2]! }, {}, async (t) => {
      const messages = [{ role: "user", content: "List the files." }];
      const first = (await (await t.post("/v1/chat/completions", { messages, tools })).json()) as Json;
      const message = first.choices[0].message;
      assert.equal(message.reasoning_content, "Need to list.");
      assert.equal(message.content, null);
      assert.equal(message.tool_calls[0].function.name, "bash");
      assert.equal(first.choices[0].finish_reason, "tool_calls");
      assert.equal(
        t.engine.requests[0]!.sampling.skipSpecialTokens,
        false,
        "control tokens kept in the text",
      );
      assert.ok(t.engine.requests[0]!.prompt.endsWith("<|start|>assistant"));
      // the call and its result sent back render with the model's template, and the answer comes
      const next = [
        ...messages,
        { role: "assistant", content: null, tool_calls: message.tool_calls },
        { role: "tool", tool_call_id: message.tool_calls[0].id, content: "README.md" },
      ];
      const sse = await (
        await t.post("/v1/chat/completions", { messages: next, tools, stream: true })
      ).text();
      const prompt = t.engine.requests[1]!.prompt;
      assert.match(prompt, /to=functions\.bash<\|channel\|>commentary json<\|message\|>/);
      assert.match(
        prompt,
        /<\|start\|>functions\.bash to=assistant<\|channel\|>commentary<\|message\|>"README.md"/,
      );
      const deltas = sseEvents(sse)
        .slice(0, -1)
        .map((frame) => (JSON.parse(frame) as Json).choices[0]?.delta ?? {});
      assert.equal(deltas.map((d) => d.reasoning_content ?? "").join(""), "Need to list.");
      assert.equal(deltas.map((d) => d.content ?? "").join(""), "Here they are.");
    });
  });

  test("a thinking budget ends the analysis channel and opens the final one", async () => {
    await withServer({ chatTemplate: gptOss, reply: () => FINAL }, {}, async (t) => {
      const messages = [{ role: "user", content: "Hi." }];
      await t.post("/v1/chat/completions", { messages, thinking_budget: 100 });
      assert.deepEqual(t.engine.requests[0]!.sampling.thinkingBudget, {
        tokens: 100,
        open: "<|channel|>analysis<|message|>",
        closedBy: "<|end|>",
        close: "<|end|><|start|>assistant<|channel|>final<|message|>",
      });
    });
  });

  test("messages and responses: a thinking block / reasoning item, then the call", async () => {
    await withServer({ chatTemplate: gptOss, reply: () => `${ANALYSIS}${CALL}` }, {}, async (t) => {
      const anthropicTools = [{ name: "bash", input_schema: { type: "object", properties: {} } }];
      const message = (await (
        await t.post("/v1/messages", {
          model: "fake-model",
          max_tokens: 64,
          thinking: { type: "enabled", budget_tokens: 1024 },
          tools: anthropicTools,
          messages: [{ role: "user", content: "List the files." }],
        })
      ).json()) as Json;
      assert.deepEqual(
        message.content.map((b: Json) => b.type),
        ["thinking", "tool_use"],
      );
      assert.equal(message.content[0].thinking, "Need to list.");
      const response = (await (
        await t.post("/v1/responses", {
          input: "List the files.",
          tools: [{ type: "function", name: "bash", parameters: { type: "object", properties: {} } }],
        })
      ).json()) as Json;
      assert.deepEqual(
        response.output.map((item: Json) => item.type),
        ["reasoning", "function_call"],
      );
    });
  });

  test("an earlier turn's thinking sent back (chat's reasoning, a Responses reasoning item) renders as analysis", async () => {
    await withServer({ chatTemplate: gptOss, reply: () => FINAL }, {}, async (t) => {
      const call = { id: "c1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } };
      const messages = [
        { role: "user", content: "List the files." },
        { role: "assistant", content: null, reasoning: "Need to list.", tool_calls: [call] },
        { role: "tool", tool_call_id: "c1", content: "README.md" },
      ];
      await t.post("/v1/chat/completions", { messages, tools });
      const analysis =
        "<|start|>assistant<|channel|>analysis<|message|>Need to list.<|end|><|start|>assistant to=functions.bash";
      assert.ok(t.engine.requests[0]!.prompt.includes(analysis), t.engine.requests[0]!.prompt);
      await t.post("/v1/responses", {
        input: [
          { type: "message", role: "user", content: "List the files." },
          { type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "Need to list." }] },
          { type: "function_call", call_id: "c1", name: "bash", arguments: '{"command":"ls"}' },
          { type: "function_call_output", call_id: "c1", output: "README.md" },
        ],
        tools: [{ type: "function", name: "bash", parameters: { type: "object", properties: {} } }],
      });
      assert.ok(t.engine.requests[1]!.prompt.includes(analysis));
    });
  });

  test("reasoning effort (chat's reasoning_effort, Responses' reasoning.effort) is the template's Reasoning line", async () => {
    await withServer({ chatTemplate: gptOss, reply: () => FINAL }, {}, async (t) => {
      const messages = [{ role: "user", content: "Hi." }];
      await t.post("/v1/chat/completions", { messages });
      await t.post("/v1/chat/completions", { messages, reasoning_effort: "high" });
      await t.post("/v1/responses", { input: "Hi.", reasoning: { effort: "low" } });
      await t.post("/v1/chat/completions", {
        messages,
        reasoning_effort: "high",
        chat_template_kwargs: { reasoning_effort: "low" },
      });
      assert.deepEqual(
        t.engine.requests.map((r) => /Reasoning: (\w+)/.exec(r.prompt)?.[1]),
        ["medium", "high", "low", "low"],
      );
    });
  });
});
