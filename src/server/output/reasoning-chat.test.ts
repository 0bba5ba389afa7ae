/**
 * A reasoning model through chat completions and Messages: its `<think>` block comes back as
 * `reasoning_content` (a thinking block), tool calls are parsed in the answer only, streamed alike;
 * `reasoningFormat: "none"` leaves the block in.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import type { ModelChatTemplate } from "../../engine/engine-api.js";
import { llamaTemplate, qwen3ChatTemplate } from "../test-support/llama-templates.js";
import { type Json, sseEvents, streamedChoice, withServer } from "../test-support/test-server.js";

const qwen3 = qwen3ChatTemplate();

const messages = [{ role: "user", content: "List the files." }];
const tools = [
  {
    type: "function",
    function: { name: "bash", parameters: { type: "object", properties: { command: { type: "string" } } } },
  },
];
const call = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>';

describe("reasoning models on chat completions and messages", () => {
  test("the thinking is reasoning_content; a call written while thinking is not a call", async () => {
    const reply = () => `<think>\nMaybe <tool_call> later.\n</think>\n\n${call}`;
    await withServer({ chatTemplate: qwen3, reply }, {}, async (t) => {
      const body = (await (await t.post("/v1/chat/completions", { messages, tools })).json()) as Json;
      const message = body.choices[0].message;
      assert.equal(message.reasoning_content, "Maybe <tool_call> later.");
      assert.equal(message.content, null);
      assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), { command: "ls" });
      assert.equal(body.choices[0].finish_reason, "tool_calls");
      const sse = await (await t.post("/v1/chat/completions", { messages, tools, stream: true })).text();
      const deltas = sseEvents(sse)
        .slice(0, -1)
        .map((frame) => (JSON.parse(frame) as Json).choices[0]?.delta ?? {});
      assert.equal(
        deltas
          .map((d) => d.reasoning_content ?? "")
          .join("")
          .trim(),
        "Maybe <tool_call> later.",
      );
      assert.equal(deltas.map((d) => d.content ?? "").join(""), "");
      assert.deepEqual(
        deltas
          .flatMap((d) => d.tool_calls ?? [])
          .map((c: Json) => c.function?.name)
          .filter(Boolean),
        ["bash"],
      );
    });
  });

  test("streamed in pieces that split the tags: the same thinking and answer", async () => {
    const reply = () => ["<thi", "nk>\nPlan", " it.\n</th", "ink>\n", "\nHere it ", "is."];
    await withServer({ chatTemplate: qwen3, reply }, {}, async (t) => {
      const sse = await (await t.post("/v1/chat/completions", { messages, stream: true })).text();
      const { reasoning, content } = streamedChoice(sse);
      assert.equal(reasoning.trim(), "Plan it.");
      assert.equal(content, "Here it is.");
    });
  });

  test("a prompt that opens the block (DeepSeek-R1's template): the output starts inside it", async () => {
    const r1: ModelChatTemplate = {
      ...qwen3,
      source: llamaTemplate("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"),
      bosToken: "<｜begin▁of▁sentence｜>",
    };
    const reply = () => "Short.\n</think>\n\nAnswer.";
    await withServer({ chatTemplate: r1, reply }, {}, async (t) => {
      const body = (await (
        await t.post("/v1/chat/completions", { messages, chat_template_kwargs: { enable_thinking: true } })
      ).json()) as Json;
      assert.ok(t.engine.requests[0]!.prompt.endsWith("<think>\n"));
      assert.equal(body.choices[0].message.reasoning_content, "Short.");
      assert.equal(body.choices[0].message.content, "Answer.");
    });
  });

  test("a family's own tags (Seed-OSS's <seed:think>): thinking apart, then its own tool call; whole and streamed", async () => {
    const seed: ModelChatTemplate = { ...qwen3, source: llamaTemplate("ByteDance-Seed-OSS") };
    const reply = () => [
      "<seed:think>Need the files, <think> is",
      " text here.</seed:",
      "think>\nListing.<seed:tool_call>\n<function=bash>\n<parameter=command>ls</parameter>\n</function>\n</seed:tool_call>",
    ];
    const tools = [
      {
        type: "function",
        function: {
          name: "bash",
          parameters: { type: "object", properties: { command: { type: "string" } } },
        },
      },
    ];
    await withServer({ chatTemplate: seed, reply }, {}, async (t) => {
      const whole = (await (await t.post("/v1/chat/completions", { messages, tools })).json()) as Json;
      const message = whole.choices[0].message;
      assert.equal(message.reasoning_content, "Need the files, <think> is text here.");
      assert.equal(message.content, "Listing.");
      assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), { command: "ls" });
      assert.deepEqual(t.engine.requests[0]!.sampling.preservedTokens?.slice(-2), [
        "<seed:think>",
        "</seed:think>",
      ]);
      const sse = await (await t.post("/v1/chat/completions", { messages, tools, stream: true })).text();
      const { reasoning, content } = streamedChoice(sse);
      assert.equal(reasoning.trim(), "Need the files, <think> is text here.");
      assert.equal(content.trim(), "Listing.");
      const budget = await t.post("/v1/chat/completions", { messages, thinking_budget: 8 });
      assert.equal(budget.status, 200);
      assert.deepEqual(t.engine.requests.at(-1)!.sampling.thinkingBudget, {
        tokens: 8,
        open: "<seed:think>",
        closedBy: "</seed:think>",
        close: "\n</seed:think>\n\n",
      });
    });
  });

  test("reasoningFormat none, or a template without thinking: the output as generated", async () => {
    const reply = () => "<think>\nPlan.\n</think>\n\nHere.";
    await withServer({ chatTemplate: qwen3, reply }, { reasoningFormat: "none" }, async (t) => {
      const body = (await (await t.post("/v1/chat/completions", { messages })).json()) as Json;
      assert.equal(body.choices[0].message.content, reply());
      assert.equal(body.choices[0].message.reasoning_content, undefined);
    });
    await withServer({ reply }, {}, async (t) => {
      const body = (await (await t.post("/v1/chat/completions", { messages })).json()) as Json;
      assert.equal(body.choices[0].message.content, reply());
    });
  });

  test("messages (Claude Code's API): a thinking block before the tool use, streamed and whole, read by Anthropic's SDK", async () => {
    const reply = () => [`<think>\nNeed`, ` ls.\n</think>\n\n`, call];
    await withServer({ chatTemplate: qwen3, reply }, {}, async (t) => {
      const anthropic = new Anthropic({ baseURL: t.url, apiKey: "x", maxRetries: 0 });
      const request = {
        model: "fake-model",
        max_tokens: 256,
        messages: [{ role: "user" as const, content: "List the files." }],
        tools: [
          {
            name: "bash",
            input_schema: { type: "object" as const, properties: { command: { type: "string" } } },
          },
        ],
      };
      const whole = await anthropic.messages.create(request);
      const streamed = await anthropic.messages.stream(request).finalMessage();
      for (const message of [whole, streamed]) {
        assert.deepEqual(
          message.content.map((b) => b.type),
          ["thinking", "tool_use"],
        );
        const [thinking, use] = message.content as [Anthropic.ThinkingBlock, Anthropic.ToolUseBlock];
        assert.equal(thinking.thinking.trim(), "Need ls.");
        assert.deepEqual(use.input, { command: "ls" });
        assert.equal(message.stop_reason, "tool_use");
      }
    });
  });

  test("messages: the model thinks only when the request enables thinking, as Anthropic's models", async () => {
    await withServer({ chatTemplate: qwen3, reply: () => "Here." }, {}, async (t) => {
      const request = { model: "fake-model", max_tokens: 64, messages: [{ role: "user", content: "Hi." }] };
      await (await t.post("/v1/messages", request)).json();
      await (
        await t.post("/v1/messages", { ...request, thinking: { type: "enabled", budget_tokens: 1024 } })
      ).json();
      const [plain, thinking] = t.engine.requests.map((r) => r.prompt);
      assert.ok(plain!.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "an empty block closed");
      assert.ok(thinking!.endsWith("<|im_start|>assistant\n"));
      const counted = async (body: Record<string, unknown>) =>
        ((await (await t.post("/v1/messages/count_tokens", body)).json()) as Json).input_tokens as number;
      const { max_tokens: _, ...countRequest } = request;
      assert.ok(
        (await counted(countRequest)) > (await counted({ ...countRequest, thinking: { type: "enabled" } })),
      );
    });
  });

  test("a thinking budget (chat's thinking_budget, Messages' budget_tokens) reaches the engine for a thinking template only", async () => {
    const r1: ModelChatTemplate = {
      ...qwen3,
      source: llamaTemplate("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"),
      bosToken: "<｜begin▁of▁sentence｜>",
    };
    const close = "\n</think>\n\n";
    const budgetOf = async (template: ModelChatTemplate | undefined, path: string, body: object) => {
      let budget: unknown;
      await withServer(
        { ...(template ? { chatTemplate: template } : {}), reply: () => "ok" },
        {},
        async (t) => {
          assert.equal((await t.post(path, { model: "fake-model", max_tokens: 8, ...body })).status, 200);
          budget = t.engine.requests[0]!.sampling.thinkingBudget;
        },
      );
      return budget;
    };
    // Qwen3 thinks once the model opens the block; DeepSeek-R1's prompt opens it
    assert.deepEqual(await budgetOf(qwen3, "/v1/chat/completions", { messages, thinking_budget: 64 }), {
      tokens: 64,
      open: "<think>",
      closedBy: "</think>",
      close,
    });
    const opened = { messages, thinking_budget: 64, chat_template_kwargs: { enable_thinking: true } };
    assert.deepEqual(await budgetOf(r1, "/v1/chat/completions", opened), {
      tokens: 64,
      open: null,
      closedBy: "</think>",
      close,
    });
    assert.equal(
      await budgetOf(undefined, "/v1/chat/completions", { messages, thinking_budget: 64 }),
      undefined,
    );
    const thinking = { type: "enabled", budget_tokens: 1024 };
    assert.deepEqual(await budgetOf(qwen3, "/v1/messages", { messages, thinking }), {
      tokens: 1024,
      open: "<think>",
      closedBy: "</think>",
      close,
    });
    assert.equal(await budgetOf(qwen3, "/v1/messages", { messages }), undefined, "thinking not enabled");
  });

  test("an earlier turn's thinking sent back (reasoning_content, a Messages thinking block) renders as the template keeps it", async () => {
    await withServer({ chatTemplate: qwen3, reply: () => "Done." }, {}, async (t) => {
      const call = { id: "c1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } };
      await t.post("/v1/chat/completions", {
        messages: [
          ...messages,
          { role: "assistant", content: "", reasoning_content: "Need ls.", tool_calls: [call] },
          { role: "tool", tool_call_id: "c1", content: "README.md" },
        ],
        tools,
      });
      assert.match(t.engine.requests[0]!.prompt, /<think>\nNeed ls\.\n<\/think>\n\n<tool_call>/);
      await t.post("/v1/messages", {
        model: "fake-model",
        max_tokens: 16,
        tools: [{ name: "bash", input_schema: { type: "object", properties: {} } }],
        messages: [
          { role: "user", content: "List the files." },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "Need ls.", signature: "" },
              { type: "tool_use", id: "c1", name: "bash", input: { command: "ls" } },
            ],
          },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "README.md" }] },
        ],
      });
      assert.match(t.engine.requests[1]!.prompt, /<think>\nNeed ls\.\n<\/think>\n\n<tool_call>/);
    });
  });

  test("the markers an output is read by are written into its text, should the model hold them as control tokens", async () => {
    const mistral: ModelChatTemplate = {
      ...qwen3,
      source: llamaTemplate("mistralai-Mistral-Nemo-Instruct-2407"),
    };
    const preserved = async (template: ModelChatTemplate) => {
      let tokens: unknown;
      await withServer({ chatTemplate: template, reply: () => "ok" }, {}, async (t) => {
        await t.post("/v1/chat/completions", { messages, tools });
        tokens = t.engine.requests[0]!.sampling.preservedTokens;
      });
      return tokens;
    };
    assert.deepEqual(await preserved(qwen3), ["<tool_call>", "</tool_call>", "<think>", "</think>"]);
    assert.deepEqual(await preserved(mistral), ["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"]);
  });
});
