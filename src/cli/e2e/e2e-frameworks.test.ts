/**
 * Agent frameworks against `continuum serve` (real engine, built-in tiny model), unmodified: the Vercel
 * AI SDK and LangChain.js each run a 3-step forced tool loop and end it with a `tool_choice: "none"`
 * answer under one program id. The final turn must find the earlier turns' KV (its prompt extends
 * theirs), and a forced call cut off by max_tokens must reach the framework as a call, never as markup.
 * The tool's argument is an enum so the tiny model's calls close after a few tokens.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { type AIMessage, type BaseMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, type ModelMessage, stepCountIs, tool } from "ai";
import { z } from "zod";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { startLlamaServer } from "../test-support/llama-server.js";

/** One KV block: what a returning prompt may recompute of its cached prefix. */
const BLOCK_TOKENS = 16;
const FLAGS = ["--scheduling-policy", "cachettl", "--max-num-seqs", "2"];

const COMMANDS = ["ls", "pwd", "pytest"] as const;
const SHELL_PARAMETERS = {
  type: "object",
  properties: { command: { type: "string", enum: [...COMMANDS] } },
  required: ["command"],
};
const FREE_TEXT_PARAMETERS = {
  type: "object",
  properties: { command: { type: "string" } },
  required: ["command"],
};

describe("agent frameworks against continuum serve (real engine, tiny model)", { skip: llamaSkip }, () => {
  test("Vercel AI SDK: forced tool loop, then a tool_choice none answer that reuses the program's KV", async () => {
    const s = await startLlamaServer(FLAGS);
    try {
      const provider = createOpenAICompatible({
        name: "continuum",
        baseURL: `${s.server.url}/v1`,
        headers: { "X-Program-Id": "ai-sdk-loop" },
        includeUsage: true,
      });
      const model = provider.chatModel(s.model);
      const runShell = tool({
        description: "Run a shell command",
        inputSchema: z.object({ command: z.enum(COMMANDS) }),
        execute: async ({ command }) => `ran ${command}: ok`,
      });
      const prompt: ModelMessage[] = [{ role: "user", content: "Fix the failing test in this repo." }];
      const loop = await generateText({
        model,
        messages: prompt,
        tools: { run_shell: runShell },
        toolChoice: "required",
        stopWhen: stepCountIs(3),
        temperature: 0,
        maxRetries: 0,
      });
      assert.equal(loop.steps.length, 3);
      for (const step of loop.steps) {
        assert.equal(step.toolCalls.length, 1, JSON.stringify(step.content));
        assert.ok(!step.text.includes("<tool_call>"));
      }
      const cachedByStep = loop.steps.map((step) => step.usage.inputTokenDetails.cacheReadTokens ?? 0);
      assert.ok(cachedByStep[1]! > 0 && cachedByStep[2]! > cachedByStep[1]!, `cached ${cachedByStep}`);

      const answer = await generateText({
        model,
        messages: [...prompt, ...loop.response.messages],
        tools: { run_shell: runShell },
        toolChoice: "none",
        maxOutputTokens: 8,
        temperature: 0,
        maxRetries: 0,
      });
      const previousPrompt = loop.steps.at(-1)!.usage.inputTokens!;
      const cached = answer.usage.inputTokenDetails.cacheReadTokens ?? 0;
      assert.ok(
        cached >= previousPrompt - BLOCK_TOKENS,
        `the final turn cached ${cached} tokens; the previous turn's prompt had ${previousPrompt}`,
      );
      assert.equal(answer.toolCalls.length, 0);

      const cut = await generateText({
        model,
        messages: prompt,
        tools: {
          run_shell: tool({
            description: "Run a shell command",
            inputSchema: z.object({ command: z.string() }),
          }),
        },
        toolChoice: "required",
        maxOutputTokens: 12,
        temperature: 0,
        maxRetries: 0,
      });
      assert.equal(cut.finishReason, "length");
      assert.ok(!cut.text.includes("<tool_call>"), `markup in the text: ${JSON.stringify(cut.text)}`);
      // The SDK keeps the partial call (its input does not validate yet) and reports why beside it.
      const calls = cut.content.filter((part) => part.type === "tool-call");
      assert.equal(calls.length, 1, JSON.stringify(cut.content));
      assert.equal(calls[0]!.toolName, "run_shell");
    } finally {
      await s.close();
    }
  });

  test("LangChain.js: bindTools loop, then tool_choice none; a cut-off call is a call, not content", async () => {
    const s = await startLlamaServer(FLAGS);
    try {
      const chat = (maxTokens: number) =>
        new ChatOpenAI({
          model: s.model,
          apiKey: "unused",
          temperature: 0,
          maxRetries: 0,
          maxTokens,
          configuration: {
            baseURL: `${s.server.url}/v1`,
            defaultHeaders: { "X-Program-Id": "langchain-loop" },
          },
        });
      const shell = (parameters: object) => ({
        type: "function" as const,
        function: { name: "run_shell", description: "Run a shell command", parameters },
      });
      const messages: BaseMessage[] = [new HumanMessage("Fix the failing test in this repo.")];
      const forced = chat(64).bindTools([shell(SHELL_PARAMETERS)], { tool_choice: "required" });
      let previousPrompt = 0;
      for (let step = 0; step < 3; step++) {
        const reply = (await forced.invoke(messages)) as AIMessage;
        assert.equal(reply.tool_calls?.length, 1, JSON.stringify(reply.content));
        assert.ok(!String(reply.content).includes("<tool_call>"));
        const call = reply.tool_calls![0]!;
        assert.ok(COMMANDS.includes(call.args["command"]));
        previousPrompt = reply.usage_metadata!.input_tokens;
        messages.push(
          reply,
          new ToolMessage({ content: `ran ${call.args["command"]}: ok`, tool_call_id: call.id! }),
        );
      }
      const answer = (await chat(8)
        .bindTools([shell(SHELL_PARAMETERS)], { tool_choice: "none" })
        .invoke(messages)) as AIMessage;
      const cached = answer.usage_metadata?.input_token_details?.cache_read ?? 0;
      assert.ok(
        cached >= previousPrompt - BLOCK_TOKENS,
        `the final turn cached ${cached} tokens; the previous turn's prompt had ${previousPrompt}`,
      );
      assert.equal(answer.tool_calls?.length ?? 0, 0);

      const cut = (await chat(12)
        .bindTools([shell(FREE_TEXT_PARAMETERS)], { tool_choice: "required" })
        .invoke([new HumanMessage("List the files.")])) as AIMessage;
      assert.equal(cut.response_metadata["finish_reason"], "length");
      assert.ok(!String(cut.content).includes("<tool_call>"), `markup in the content: ${cut.content}`);
      const calls = [...(cut.tool_calls ?? []), ...(cut.invalid_tool_calls ?? [])];
      assert.equal(calls.length, 1);
      assert.equal(calls[0]!.name, "run_shell");
    } finally {
      await s.close();
    }
  });
});
