/**
 * The server over the real Engine (core scheduler, KV slots, streaming) with the deterministic fake
 * model runner, driven by the openai SDK as an agent would.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import { createFakeEngine } from "../engine/test-support/fake-model-runner.js";
import { startServer } from "./server.js";

async function withEngineServer(
  reply: (prompt: string) => string,
  fn: (openai: OpenAI, url: string, engine: ReturnType<typeof createFakeEngine>) => Promise<void>,
  stepDelayMs = 0,
): Promise<void> {
  const engine = createFakeEngine({ reply, stepDelayMs, kvCells: 8192, policy: "cachettl" });
  const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
  try {
    await fn(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 }), server.url, engine);
  } finally {
    await server.close({ drainTimeoutMs: 2_000 });
  }
}

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "bash",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
];

describe("server over the engine (fake runner)", () => {
  test("an agent loop: tool calls parsed, tool results sent back, later turns reuse the cached prefix", async () => {
    let turn = 0;
    const reply = () => {
      turn++;
      return turn < 3
        ? `<tool_call>\n{"name": "bash", "arguments": {"command": "ls dir${turn}"}}\n</tool_call>`
        : "All done.";
    };
    await withEngineServer(reply, async (openai, url) => {
      const messages: ChatCompletionMessageParam[] = [
        { role: "system", content: "You are an agent." },
        { role: "user", content: "Explore the repository." },
      ];
      const cached: number[] = [];
      for (let step = 0; step < 3; step++) {
        const response = await openai.chat.completions.create({
          model: (await openai.models.list()).data[0]!.id,
          messages,
          tools,
          max_tokens: 256,
          job_id: "agent-1",
          is_last_step: step === 2,
        } as ChatCompletionCreateParamsNonStreaming);
        const choice = response.choices[0]!;
        cached.push(response.usage?.prompt_tokens_details?.cached_tokens ?? -1);
        if (step < 2) {
          assert.equal(choice.finish_reason, "tool_calls");
          const call = choice.message.tool_calls![0]!;
          assert.ok(call.type === "function");
          assert.deepEqual(JSON.parse(call.function.arguments), { command: `ls dir${step + 1}` });
          messages.push({
            role: "assistant",
            content: choice.message.content,
            tool_calls: choice.message.tool_calls!,
          });
          messages.push({ role: "tool", tool_call_id: call.id, content: `file${step}.py` });
        } else {
          assert.equal(choice.message.content, "All done.");
        }
      }
      assert.equal(cached[0], 0);
      assert.ok(cached[1]! > 0 && cached[2]! > cached[1]!, `cached tokens per turn: ${cached}`);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      assert.match(metrics, /^continuum:prefix_cache_hits_total\{model_name="[^"]+"\} [1-9]/m);
      assert.match(metrics, /^continuum:e2e_request_latency_seconds_count\{model_name="[^"]+"\} 3$/m);
    });
  });

  test("a dropped stream frees the engine request", async () => {
    const long = Array.from({ length: 300 }, (_, i) => `w${i}`).join(" ");
    await withEngineServer(
      () => long,
      async (openai, _url, engine) => {
        const controller = new AbortController();
        const stream = await openai.chat.completions.create(
          { model: engine.modelId, messages: [{ role: "user", content: "talk" }], stream: true },
          { signal: controller.signal },
        );
        let chunks = 0;
        try {
          for await (const _ of stream) if (++chunks === 2) controller.abort();
        } catch {
          // the SDK may surface the abort as an error
        }
        for (let i = 0; i < 300 && engine.metrics().running > 0; i++)
          await new Promise((r) => setTimeout(r, 10));
        assert.equal(engine.metrics().running, 0);
        assert.equal(engine.metrics().waiting, 0);
      },
      5,
    );
  });
});
