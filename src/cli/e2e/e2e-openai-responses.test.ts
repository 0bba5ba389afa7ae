/**
 * End to end: the official `openai` SDK's `responses.create` against `continuum serve` (real engine,
 * built-in tiny model), as Codex CLI uses it: stateless turns that resend the whole input under one
 * `session-id` header, function tools beside hosted ones the server drops, and `store: true` with
 * `previous_response_id`.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { NotFoundError } from "openai";
import type { ResponseInputItem, ResponseStreamEvent } from "openai/resources/responses/responses";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { type LlamaServer, startLlamaServer } from "../test-support/llama-server.js";

/** One KV block: what a returning prompt may recompute of its cached prefix. */
const BLOCK_TOKENS = 16;
/** The tiny model pads a forced call with whitespace: about 60 tokens close one. */
const CALL_TOKENS = 96;
const COMMANDS = ["ls", "pwd", "pytest"] as const;
const RUN_SHELL = {
  type: "function" as const,
  name: "run_shell",
  description: "Run a shell command",
  parameters: {
    type: "object",
    properties: { command: { type: "string", enum: [...COMMANDS] } },
    required: ["command"],
    additionalProperties: false,
  },
  strict: true,
};

describe("openai SDK responses.create against continuum serve (real engine, tiny model)", {
  skip: llamaSkip,
}, () => {
  let s: LlamaServer;
  before(async () => {
    s = await startLlamaServer(["--scheduling-policy", "cachettl", "--max-num-seqs", "2"]);
  });
  after(() => s?.close());

  test("stateless: a string input, then a list with instructions and a developer message", async () => {
    const plain = await s.openai.responses.create({
      model: s.model,
      input: "List files with ls.",
      max_output_tokens: 6,
      temperature: 0,
    });
    assert.equal(plain.object, "response");
    assert.match(plain.id, /^resp_/);
    assert.equal(plain.output[0]?.type, "message");
    assert.ok(plain.output_text.length > 0);
    assert.equal(plain.usage!.total_tokens, plain.usage!.input_tokens + plain.usage!.output_tokens);

    const instructed = await s.openai.responses.create({
      model: s.model,
      instructions: "You are a careful shell assistant.",
      input: [
        { role: "developer", content: [{ type: "input_text", text: "Answer with one command." }] },
        { role: "user", content: [{ type: "input_text", text: "List files with ls." }] },
      ],
      max_output_tokens: 6,
      temperature: 0,
      store: false,
      reasoning: { effort: "low" },
      include: ["reasoning.encrypted_content"],
    });
    assert.equal(instructed.instructions, "You are a careful shell assistant.");
    assert.ok(instructed.output_text.length > 0);
    // the instructions and the developer message reached the prompt
    assert.ok(instructed.usage!.input_tokens > plain.usage!.input_tokens + 10);
  });

  test("streaming: output_text deltas add up to the completed response's text, with its usage", async () => {
    const stream = await s.openai.responses.create({
      model: s.model,
      input: "List files with ls.",
      max_output_tokens: 8,
      temperature: 0,
      stream: true,
      // vLLM's extension, passed through: the output runs to max_output_tokens
      ...{ ignore_eos: true },
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    assert.deepEqual(
      events.slice(0, 2).map((e) => e.type),
      ["response.created", "response.in_progress"],
    );
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    );
    const deltas = events.flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : []));
    assert.ok(deltas.length >= 3, `${deltas.length} deltas`);
    const last = events.at(-1)!;
    assert.equal(last.type, "response.incomplete");
    assert.ok(last.type === "response.incomplete");
    assert.deepEqual(last.response.incomplete_details, { reason: "max_output_tokens" });
    const message = last.response.output[0]!;
    assert.ok(message.type === "message" && message.content[0]!.type === "output_text");
    assert.equal(message.content[0]!.text, deltas.join(""));
    assert.equal(last.response.usage!.output_tokens, 8);
    assert.ok(last.response.usage!.input_tokens > 5);
  });

  test("a forced function tool gives a function_call with JSON arguments; hosted tools are dropped", async () => {
    const response = await s.openai.responses.create({
      model: s.model,
      input: "Fix the failing test in this repo.",
      tools: [RUN_SHELL, { type: "web_search" }],
      tool_choice: { type: "function", name: "run_shell" },
      temperature: 0,
      max_output_tokens: CALL_TOKENS,
    });
    const call = response.output.find((item) => item.type === "function_call");
    assert.ok(call?.type === "function_call", JSON.stringify(response.output));
    assert.equal(call.name, "run_shell");
    assert.match(call.call_id, /^call_/);
    assert.ok(COMMANDS.includes(JSON.parse(call.arguments).command), call.arguments);
    assert.deepEqual(
      response.tools.map((tool) => tool.type),
      ["function"],
    );
  });

  test("a tool of a namespace (how Codex sends MCP tools) is called with its own name and its namespace", async () => {
    const { strict, ...runShell } = RUN_SHELL;
    const response = await s.openai.responses.create({
      model: s.model,
      input: "Fix the failing test in this repo.",
      tools: [{ type: "namespace", name: "mcp__repo", description: "The repo's tools.", tools: [runShell] }],
      tool_choice: { type: "function", name: "mcp__repo__run_shell" },
      temperature: 0,
      max_output_tokens: CALL_TOKENS,
    });
    const call = response.output.find((item) => item.type === "function_call");
    assert.ok(call?.type === "function_call", JSON.stringify(response.output));
    assert.deepEqual([call.name, call.namespace], ["run_shell", "mcp__repo"]);
    assert.ok(COMMANDS.includes(JSON.parse(call.arguments).command), call.arguments);
    assert.deepEqual(
      response.tools.map((tool) => tool.type),
      ["namespace"],
    );
  });

  test("a forced custom tool gives a custom_tool_call with its input as text", async () => {
    const response = await s.openai.responses.create({
      model: s.model,
      input: "Write a note.",
      tools: [{ type: "custom", name: "note", description: "Keep a note." }],
      tool_choice: { type: "custom", name: "note" },
      temperature: 0,
      max_output_tokens: CALL_TOKENS,
    });
    const call = response.output.find((item) => item.type === "custom_tool_call");
    assert.ok(call?.type === "custom_tool_call", JSON.stringify(response.output));
    assert.equal(call.name, "note");
    assert.equal(typeof call.input, "string");
    assert.ok(!call.input.startsWith('{"input"'), "the text itself, not the arguments around it");
  });

  test("a web_search tool alone (auto) is dropped without an error", async () => {
    const response = await s.openai.responses.create({
      model: s.model,
      input: "What is new today?",
      tools: [{ type: "web_search" }],
      max_output_tokens: 4,
      temperature: 0,
    });
    assert.equal(response.output[0]?.type, "message");
    assert.deepEqual(response.tools, []);
  });

  test("a 4-turn stateless tool loop under one session-id reuses each previous turn's prompt and call", async () => {
    const input: ResponseInputItem[] = [
      { role: "developer", content: "Fix the failing test in this repo." },
      { role: "user", content: "Go." },
    ];
    const sequences: number[] = [];
    const cached: number[] = [];
    for (let turn = 0; turn < 4; turn++) {
      const response = await s.openai.responses.create(
        {
          model: s.model,
          input,
          tools: [RUN_SHELL],
          tool_choice: "required",
          parallel_tool_calls: false,
          store: false,
          temperature: 0,
          max_output_tokens: CALL_TOKENS,
        },
        { headers: { "session-id": "codex-session-1", "thread-id": "codex-thread-1" } },
      );
      const call = response.output.find((item) => item.type === "function_call");
      assert.ok(call?.type === "function_call", JSON.stringify(response.output));
      assert.ok(COMMANDS.includes(JSON.parse(call.arguments).command), call.arguments);
      input.push(
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.call_id, output: `ran ${turn}: ok` },
      );
      sequences.push(response.usage!.input_tokens + response.usage!.output_tokens);
      cached.push(response.usage!.input_tokens_details.cached_tokens);
    }
    for (let turn = 1; turn < 4; turn++) {
      // every full block of the previous prompt and call (its last token was sampled, never fed)
      const previous = sequences[turn - 1]! - 1;
      assert.ok(
        cached[turn]! >= previous - (previous % BLOCK_TOKENS),
        `turn ${turn} cached ${cached[turn]} of the previous prompt and call's ${sequences[turn - 1]} (all: ${cached})`,
      );
    }
  });

  test("a response continues from previous_response_id unless created with store: false; an unknown id is a 404", async () => {
    // OpenAI's multi-turn example as its docs write it: `store` left out keeps the response
    const first = await s.openai.responses.create({
      model: s.model,
      input: "My name is Ada.",
      max_output_tokens: 4,
      temperature: 0,
    });
    const second = await s.openai.responses.create({
      model: s.model,
      previous_response_id: first.id,
      input: "What is my name?",
      store: false,
      max_output_tokens: 4,
      temperature: 0,
    });
    assert.equal(second.previous_response_id, first.id);
    // the first turn's input and output came before the new input
    assert.ok(
      second.usage!.input_tokens > first.usage!.total_tokens,
      `${second.usage!.input_tokens} input tokens after a ${first.usage!.total_tokens}-token turn`,
    );
    await assert.rejects(
      s.openai.responses.create({ model: s.model, previous_response_id: "resp_unknown", input: "Hi" }),
      (error: unknown) =>
        error instanceof NotFoundError &&
        (error.error as { code?: string }).code === "previous_response_not_found",
    );
    // a response created with store: false cannot be continued
    await assert.rejects(
      s.openai.responses.create({ model: s.model, previous_response_id: second.id, input: "Hi" }),
      NotFoundError,
    );
  });
});
