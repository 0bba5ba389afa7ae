/**
 * A tool call cut off at max_tokens, sent back the way pi-coding-agent sends it, continues its program with
 * the cut output's KV reused, over all three APIs. pi streams every turn, reads a call's arguments with a
 * partial-JSON parser as they arrive (the cut string kept), and sends the call back written again as JSON
 * (`JSON.stringify` in chat completions and Responses, the object as Anthropic's `tool_use.input`), with
 * the result of running it. The AI SDK's partial parser stands in for pi's here: both keep a cut string.
 * It names no program in chat completions and Messages, and its session as Responses' `prompt_cache_key`.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam } from "@anthropic-ai/sdk/resources/messages";
import { parsePartialJson } from "ai";
import type OpenAI from "openai";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { type LlamaServer, startLlamaServer } from "../test-support/llama-server.js";

const BLOCK = 16;
/** a forced call this short is cut inside its arguments */
const CUT_TOKENS = 40;
const TURN_TOKENS = 24;
const SYSTEM = "You are a coding agent. Write files with the write tool.";
const TASK = "Create src/main.ts with a hello world program.";
const WRITE_PARAMETERS = {
  type: "object",
  properties: { path: { type: "string" }, content: { type: "string" } },
  required: ["path", "content"],
};
const TOOL_ERROR = "Validation failed for tool write: content is required";

interface Usage {
  readonly prompt: number;
  readonly cached: number;
  readonly completion: number;
}

/** A streamed turn as pi keeps it: its text, its calls (arguments as its partial parser read them), its usage. */
interface Turn {
  readonly text: string;
  readonly calls: { id: string; name: string; args: Record<string, unknown> }[];
  readonly finish: string | null;
  readonly usage: Usage;
}

async function piArguments(partial: string): Promise<Record<string, unknown>> {
  const { value } = await parsePartialJson(partial);
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** Whole KV blocks of a turn's prompt and output: what the next turn reuses (the last token was never fed). */
const reusable = (u: Usage) => Math.floor((u.prompt + u.completion - 1) / BLOCK) * BLOCK;

async function programs(s: LlamaServer): Promise<{ id: string; turns: number }[]> {
  const state = (await (await fetch(`${s.server.url}/dashboard/state`)).json()) as {
    programs: { id: string; turns: number }[];
  };
  return state.programs;
}

/**
 * Three turns as pi runs them: a call cut off at max_tokens, sent back with its (failed) result; the reply
 * to that, sent back with a user message; then one more turn. Each later turn's cached tokens cover every
 * whole block of the previous turn's prompt and output, and the three turns are one program.
 */
async function piSequence(s: LlamaServer, turn: (n: number, maxTokens: number) => Promise<Turn>) {
  const first = await turn(0, CUT_TOKENS);
  assert.equal(first.calls.length, 1, `turn 1 must be one call: ${JSON.stringify(first)}`);
  assert.ok(["length", "max_tokens", "incomplete"].includes(first.finish ?? ""), JSON.stringify(first));
  const second = await turn(1, TURN_TOKENS);
  assert.ok(
    second.usage.cached >= reusable(first.usage),
    `turn 2: ${second.usage.cached} of ${second.usage.prompt} cached; turn 1 held ${first.usage.prompt} + ${first.usage.completion}`,
  );
  const third = await turn(2, TURN_TOKENS);
  assert.ok(
    third.usage.cached >= reusable(second.usage),
    `turn 3: ${third.usage.cached} of ${third.usage.prompt} cached; turn 2 held ${second.usage.prompt} + ${second.usage.completion}`,
  );
  const seen = await programs(s);
  assert.deepEqual(
    seen.map((p) => p.turns),
    [3],
    `one program of 3 turns: ${JSON.stringify(seen)}`,
  );
}

describe("a tool call cut off at max_tokens, sent back as pi does (real engine, tiny model)", {
  skip: llamaSkip,
}, () => {
  test("chat completions: 3 turns on 1 program, the cut output reused", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: "system", content: SYSTEM },
        { role: "user", content: TASK },
      ];
      const tools: OpenAI.Chat.ChatCompletionTool[] = [
        { type: "function", function: { name: "write", parameters: WRITE_PARAMETERS } },
      ];
      await piSequence(s, async (n, maxTokens) => {
        const stream = await s.openai.chat.completions.create({
          model: s.model,
          messages,
          tools,
          tool_choice: n === 0 ? "required" : "none",
          max_tokens: maxTokens,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        });
        let text = "";
        let finish: string | null = null;
        let usage: Usage | null = null;
        const partial: { id: string; name: string; args: string }[] = [];
        for await (const chunk of stream) {
          const choice = chunk.choices[0];
          text += choice?.delta.content ?? "";
          for (const call of choice?.delta.tool_calls ?? []) {
            partial[call.index] ??= { id: call.id ?? "", name: "", args: "" };
            partial[call.index]!.name += call.function?.name ?? "";
            partial[call.index]!.args += call.function?.arguments ?? "";
          }
          finish = choice?.finish_reason ?? finish;
          if (chunk.usage) {
            const u = chunk.usage;
            usage = {
              prompt: u.prompt_tokens,
              cached: u.prompt_tokens_details?.cached_tokens ?? 0,
              completion: u.completion_tokens,
            };
          }
        }
        const calls = await Promise.all(
          partial.map(async (c) => ({ id: c.id, name: c.name, args: await piArguments(c.args) })),
        );
        messages.push({
          role: "assistant",
          content: text || null,
          ...(calls.length > 0
            ? {
                tool_calls: calls.map((c) => ({
                  id: c.id,
                  type: "function" as const,
                  function: { name: c.name, arguments: JSON.stringify(c.args) },
                })),
              }
            : {}),
        });
        for (const c of calls) messages.push({ role: "tool", tool_call_id: c.id, content: TOOL_ERROR });
        if (calls.length === 0) messages.push({ role: "user", content: `Go on (${n}).` });
        return { text, calls, finish, usage: usage! };
      });
    } finally {
      await s.close();
    }
  });

  test("Anthropic Messages: 3 turns on 1 program, the cut output reused", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const client = new Anthropic({
        baseURL: s.server.url,
        apiKey: "unused",
        maxRetries: 0,
        timeout: 30_000,
      });
      const messages: MessageParam[] = [{ role: "user", content: TASK }];
      await piSequence(s, async (n, maxTokens) => {
        const stream = await client.messages.create({
          model: s.model,
          system: SYSTEM,
          messages,
          tools: [{ name: "write", input_schema: WRITE_PARAMETERS as Anthropic.Tool.InputSchema }],
          tool_choice: n === 0 ? { type: "any" } : { type: "none" },
          max_tokens: maxTokens,
          stream: true,
        });
        let text = "";
        let finish: string | null = null;
        let usage: Usage | null = null;
        const partial: { id: string; name: string; args: string }[] = [];
        for await (const event of stream) {
          if (event.type === "content_block_start" && event.content_block.type === "tool_use") {
            partial.push({ id: event.content_block.id, name: event.content_block.name, args: "" });
          } else if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") {
            partial.at(-1)!.args += event.delta.partial_json;
          } else if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
            text += event.delta.text;
          } else if (event.type === "message_delta") {
            finish = event.delta.stop_reason;
            const u = event.usage;
            const cached = u.cache_read_input_tokens ?? 0;
            usage = { prompt: (u.input_tokens ?? 0) + cached, cached, completion: u.output_tokens };
          }
        }
        const calls = await Promise.all(
          partial.map(async (c) => ({ id: c.id, name: c.name, args: await piArguments(c.args) })),
        );
        messages.push({
          role: "assistant",
          content: [
            ...(text ? [{ type: "text" as const, text }] : []),
            ...calls.map((c) => ({ type: "tool_use" as const, id: c.id, name: c.name, input: c.args })),
          ],
        });
        messages.push({
          role: "user",
          content:
            calls.length > 0
              ? calls.map((c) => ({
                  type: "tool_result" as const,
                  tool_use_id: c.id,
                  content: TOOL_ERROR,
                  is_error: true,
                }))
              : `Go on (${n}).`,
        });
        return { text, calls, finish, usage: usage! };
      });
    } finally {
      await s.close();
    }
  });

  test("Responses: 3 turns on 1 program, the cut output reused", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: TASK }];
      await piSequence(s, async (n, maxTokens) => {
        const stream = await s.openai.responses.create({
          model: s.model,
          instructions: SYSTEM,
          input,
          tools: [{ type: "function", name: "write", parameters: WRITE_PARAMETERS, strict: false }],
          tool_choice: n === 0 ? "required" : "none",
          max_output_tokens: maxTokens,
          temperature: 0,
          store: false,
          prompt_cache_key: "pi-session-1",
          stream: true,
        });
        let text = "";
        let finish: string | null = null;
        let usage: Usage | null = null;
        const partial: { id: string; name: string; args: string }[] = [];
        for await (const event of stream) {
          if (event.type === "response.output_item.added" && event.item.type === "function_call") {
            partial.push({ id: event.item.call_id, name: event.item.name, args: "" });
          } else if (event.type === "response.function_call_arguments.delta") {
            partial.at(-1)!.args += event.delta;
          } else if (event.type === "response.output_text.delta") {
            text += event.delta;
          } else if (event.type === "response.completed" || event.type === "response.incomplete") {
            finish = event.response.status ?? null;
            const u = event.response.usage!;
            usage = {
              prompt: u.input_tokens,
              cached: u.input_tokens_details.cached_tokens,
              completion: u.output_tokens,
            };
          }
        }
        const calls = await Promise.all(
          partial.map(async (c) => ({ id: c.id, name: c.name, args: await piArguments(c.args) })),
        );
        if (text) input.push({ role: "assistant", content: text });
        for (const c of calls) {
          input.push({
            type: "function_call",
            call_id: c.id,
            name: c.name,
            arguments: JSON.stringify(c.args),
          });
          input.push({ type: "function_call_output", call_id: c.id, output: TOOL_ERROR });
        }
        if (calls.length === 0) input.push({ role: "user", content: `Go on (${n}).` });
        return { text, calls, finish, usage: usage! };
      });
    } finally {
      await s.close();
    }
  });
});
