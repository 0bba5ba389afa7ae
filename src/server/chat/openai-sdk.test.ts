/**
 * The official `openai` npm SDK against a real listening server. Extra body fields (Python's
 * `extra_body`) are sent the same way: merged top-level into the JSON body.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from "openai/resources/chat/completions";
import { EngineRejection } from "../../engine/engine-api.js";
import { withServer } from "../test-support/test-server.js";

function client(url: string, apiKey = "unused"): OpenAI {
  return new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 10_000 });
}

const messages = [
  { role: "system" as const, content: "Respond with ONLY a ```bash``` block." },
  { role: "user" as const, content: "List files with ls." },
];

describe("openai SDK", () => {
  test("chat with job_id / is_last_step as extra body fields, usage with cached tokens", async () => {
    await withServer({ reply: () => "```bash\nls\n```" }, {}, async (t) => {
      const openai = client(t.url);
      const params = {
        model: "fake-model",
        messages,
        max_tokens: 150,
        job_id: "job_alpha",
        is_last_step: false,
        ignore_eos: false,
      } as ChatCompletionCreateParamsNonStreaming;
      const first = await openai.chat.completions.create(params);
      assert.equal(first.choices[0]!.message.content, "```bash\nls\n```");
      assert.equal(first.choices[0]!.finish_reason, "stop");
      assert.equal(first.usage?.prompt_tokens_details?.cached_tokens, 0);
      assert.deepEqual(
        [
          t.engine.requests[0]!.programId,
          t.engine.requests[0]!.isLastStep,
          t.engine.requests[0]!.sampling.maxTokens,
        ],
        ["job_alpha", false, 150],
      );

      const second = await openai.chat.completions.create({
        ...params,
        messages: [
          ...messages,
          { role: "assistant", content: "```bash\nls\n```" },
          { role: "user", content: "a.py" },
        ],
        is_last_step: true,
      } as ChatCompletionCreateParamsNonStreaming);
      assert.ok((second.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0);
      assert.equal(t.engine.requests[1]!.isLastStep, true);

      // job_id null (crashed the authors' fork) and numeric ids are fine
      await openai.chat.completions.create({
        ...params,
        job_id: null,
      } as ChatCompletionCreateParamsNonStreaming);
      // (a chat request that names no program runs in one the server finds for it)
      assert.match(t.engine.requests[2]!.programId ?? "", /^implicit-[0-9a-f]{16}$/);
      await openai.chat.completions.create({
        ...params,
        job_id: 42,
      } as ChatCompletionCreateParamsNonStreaming);
      assert.equal(t.engine.requests[3]!.programId, "42");
    });
  });

  test("streaming chat with extra body fields and include_usage", async () => {
    await withServer({ reply: () => ["```bash\n", "git ", "status\n```"] }, {}, async (t) => {
      const openai = client(t.url);
      const stream = await openai.chat.completions.create({
        model: "fake-model",
        messages,
        stream: true,
        stream_options: { include_usage: true },
        job_id: 7,
        this_func_call: "git",
      } as ChatCompletionCreateParamsStreaming);
      let text = "";
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | null | undefined = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(text, "```bash\ngit status\n```");
      assert.equal(finish, "stop");
      assert.equal(usage?.completion_tokens, 4);
      assert.equal(typeof usage?.prompt_tokens_details?.cached_tokens, "number");
      const r = t.engine.requests[0]!;
      assert.deepEqual([r.programId, r.toolHint], ["7", "git"]);
    });
  });

  test("program fields from headers (X-Program-Id, X-Last-Step)", async () => {
    await withServer({}, {}, async (t) => {
      const openai = client(t.url);
      await openai.chat.completions.create(
        { model: "fake-model", messages },
        { headers: { "X-Program-Id": "from-header", "X-Last-Step": "1" } },
      );
      assert.deepEqual(
        [t.engine.requests[0]!.programId, t.engine.requests[0]!.isLastStep],
        ["from-header", true],
      );
    });
  });

  test("tool calls parse into the SDK's types (non-streaming and streaming)", async () => {
    const reply = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>';
    await withServer({ reply: () => [reply.slice(0, 15), reply.slice(15)] }, {}, async (t) => {
      const openai = client(t.url);
      const tools: OpenAI.ChatCompletionTool[] = [
        {
          type: "function",
          function: {
            name: "bash",
            parameters: {
              type: "object",
              properties: { command: { type: "string" } },
              required: ["command"],
            },
          },
        },
      ];
      const response = await openai.chat.completions.create({ model: "fake-model", messages, tools });
      const message = response.choices[0]!.message;
      assert.equal(response.choices[0]!.finish_reason, "tool_calls");
      assert.equal(message.content, null);
      const call = message.tool_calls?.[0];
      assert.ok(call && call.type === "function");
      assert.equal(call.function.name, "bash");
      assert.deepEqual(JSON.parse(call.function.arguments), { command: "ls -la" });

      // The SDK's stream helper accumulates tool-call deltas into a final message.
      const runner = openai.chat.completions.stream({ model: "fake-model", messages, tools });
      const final = await runner.finalChatCompletion();
      const streamed = final.choices[0]!.message.tool_calls?.[0];
      assert.ok(streamed && streamed.type === "function");
      assert.equal(streamed.function.name, "bash");
      assert.deepEqual(JSON.parse(streamed.function.arguments), { command: "ls -la" });
    });
  });

  test("errors surface as the SDK's typed errors", async () => {
    await withServer(
      {
        reject: (r) =>
          r.prompt.includes("busy") ? new EngineRejection("queue full", "overloaded", 4) : null,
      },
      { apiKeys: ["k"] },
      async (t) => {
        await assert.rejects(
          client(t.url, "wrong").chat.completions.create({ model: "fake-model", messages }),
          (e: unknown) => e instanceof OpenAI.AuthenticationError && e.status === 401,
        );
        const openai = client(t.url, "k");
        await assert.rejects(
          openai.chat.completions.create({ model: "fake-model", messages, n: 65 }),
          (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "n",
        );
        await assert.rejects(
          openai.chat.completions.create({
            model: "fake-model",
            messages: [{ role: "user", content: "busy" }],
          }),
          (e: unknown) =>
            e instanceof OpenAI.RateLimitError &&
            e.code === "overloaded" &&
            e.headers.get("retry-after") === "4",
        );
        const completion = await openai.completions.create({ model: "fake-model", prompt: "Once" });
        assert.equal(completion.choices[0]!.text, "Hello there!");
        const models = await openai.models.list();
        assert.deepEqual(
          models.data.map((m) => m.id),
          ["fake-model"],
        );
      },
    );
  });

  test("aborting an SDK stream aborts the engine request", async () => {
    const pieces = Array.from({ length: 200 }, (_, i) => `t${i} `);
    await withServer({ reply: () => pieces, delayMs: 10 }, {}, async (t) => {
      const openai = client(t.url);
      const controller = new AbortController();
      const stream = await openai.chat.completions.create(
        { model: "fake-model", messages, stream: true },
        { signal: controller.signal },
      );
      let chunks = 0;
      // Depending on timing the SDK either ends the iteration or throws an abort error.
      try {
        for await (const _ of stream) if (++chunks === 3) controller.abort();
      } catch (error) {
        assert.ok(
          error instanceof OpenAI.APIUserAbortError || (error as Error).name === "AbortError",
          String(error),
        );
      }
      assert.equal(chunks, 3);
      for (let i = 0; i < 200 && t.engine.aborted.length === 0; i++)
        await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(t.engine.aborted, [t.engine.requests[0]!.requestId]);
    });
  });

  test("a conversation through the SDK: created, answered on with responses.create, its items paged", async () => {
    let turn = 0;
    await withServer({ reply: () => `Reply ${++turn}.` }, {}, async (t) => {
      const openai = client(t.url);
      const conversation = await openai.conversations.create({
        items: [{ type: "message", role: "user", content: "I am Ada." }],
        metadata: { app: "test" },
      });
      assert.equal(conversation.object, "conversation");
      for (const input of ["Hi.", "Who am I?", "Bye."]) {
        const response = await openai.responses.create({
          model: "fake-model",
          input,
          conversation: conversation.id,
        });
        assert.equal(response.conversation?.id, conversation.id);
      }
      assert.ok(/I am Ada\.[\s\S]*Reply 2\.[\s\S]*Bye\./.test(t.engine.requests[2]!.prompt));
      // the SDK's pager follows has_more / last_id over pages of 2
      const texts: string[] = [];
      for await (const item of openai.conversations.items.list(conversation.id, { limit: 2, order: "asc" })) {
        if (item.type === "message") texts.push((item.content[0] as { text: string }).text);
      }
      assert.deepEqual(texts, ["I am Ada.", "Hi.", "Reply 1.", "Who am I?", "Reply 2.", "Bye.", "Reply 3."]);
      const deleted = await openai.conversations.delete(conversation.id);
      assert.equal(deleted.deleted, true);
      await assert.rejects(openai.conversations.retrieve(conversation.id), OpenAI.NotFoundError);
    });
  });
});
