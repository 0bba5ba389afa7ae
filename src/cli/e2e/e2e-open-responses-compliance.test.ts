/**
 * The Open Responses compliance suite (github.com/openresponses/openresponses: scripts/compliance-test.ts,
 * src/lib/compliance-tests.ts, src/lib/sse-parser.ts), ported: the suite runs on bun against the repo's
 * generated zod schemas and is not published to npm, so CI cannot run it as it is. Its templates run here
 * against `continuum serve` (real llama.cpp engine, built-in tiny model), each checked as the suite
 * checks it: the final response object against the spec's ResponseResource schema
 * (server/test-support/open-responses-schema.ts), every streamed event against its event's schema, then the
 * template's own validators. A failure lists each failing field as `path: message (got value)`.
 *
 * Deviations from the templates, because the tiny model's weights are random:
 * - `status: "completed"` needs the reply to end at the end token before `max_output_tokens`. The server
 *   runs with `--logit-bias eos+5` (replies end after ~30 tokens on average) and every text request
 *   carries `max_output_tokens: 1024` and a `seed`: sampled at the default temperature, some replies
 *   would otherwise end at their first token (no output at all, ~3%) and a few run past any cap; with a
 *   seed each request's reply is the same on every run.
 * - tool-calling: the model never picks a tool by itself, so the requests add `tool_choice: "required"`
 *   and `max_output_tokens: 96`: the tiny model pads a forced call with whitespace for a few dozen
 *   tokens before its arguments start (a shorter cap leaves them empty: no arguments delta), and its
 *   string argument closes only by chance, so the call is cut: status "incomplete", which these
 *   templates do not check.
 * - image-input: the tiny model has no vision, and the server refuses image parts with a clear 400
 *   naming the part; that refusal is asserted instead of a completed response.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { deflateSync } from "node:zlib";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import {
  responseResourceSchema,
  schemaErrors,
  streamingEventSchema,
} from "../../server/test-support/open-responses-schema.js";
import { type LlamaServer, startLlamaServer } from "../test-support/llama-server.js";

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
type Json = any;

interface SseEvent {
  readonly event: string;
  readonly data: Json;
}

interface Context {
  readonly streaming: boolean;
  readonly events: readonly SseEvent[];
}

type Validator = (response: Json, context: Context) => string[];

interface Template {
  readonly id: string;
  readonly request: Record<string, unknown>;
  readonly streaming?: boolean;
  readonly validators: readonly Validator[];
}

/** What makes a random model's text reply end at the end token, non-empty (see the header). */
const TEXT_REPLY = { max_output_tokens: 1024, seed: 1 };
/** A forced call, cut short (see the header). */
const FORCED_CALL = { tool_choice: "required", max_output_tokens: 96 };

const hasOutput: Validator = (response) =>
  Array.isArray(response.output) && response.output.length > 0 ? [] : ["Response has no output items"];

const hasOutputType =
  (type: string): Validator =>
  (response) =>
    response.output.some((item: Json) => item.type === type)
      ? []
      : [`Expected output item of type "${type}" but none found`];

const completedStatus: Validator = (response) =>
  response.status === "completed" ? [] : [`Expected status "completed" but got "${response.status}"`];

const streamingEvents: Validator = (_, { streaming, events }) =>
  streaming && events.length === 0 ? ["No streaming events received"] : [];

const functionCallEvents: Validator = (_, { events }) => {
  const errors: string[] = [];
  const has = (type: string, itemType?: string) =>
    events.some((e) => e.data.type === type && (itemType === undefined || e.data.item?.type === itemType));
  if (!has("response.output_item.added", "function_call"))
    errors.push("Missing response.output_item.added event with function_call item");
  if (!has("response.function_call_arguments.delta"))
    errors.push("Missing response.function_call_arguments.delta event");
  if (!has("response.function_call_arguments.done"))
    errors.push("Missing response.function_call_arguments.done event");
  if (!has("response.output_item.done", "function_call"))
    errors.push("Missing response.output_item.done event with function_call item");
  return errors;
};

const WEATHER_TOOL = {
  type: "function",
  name: "get_weather",
  description: "Get the current weather for a location",
  parameters: {
    type: "object",
    properties: {
      location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
    },
    required: ["location"],
  },
};
const WEATHER_QUESTION = [
  { type: "message", role: "user", content: "What's the weather like in San Francisco?" },
];

const TEMPLATES: readonly Template[] = [
  {
    id: "basic-response",
    request: {
      input: [{ type: "message", role: "user", content: "Say hello in exactly 3 words." }],
      ...TEXT_REPLY,
    },
    validators: [hasOutput, completedStatus],
  },
  {
    id: "streaming-response",
    streaming: true,
    request: { input: [{ type: "message", role: "user", content: "Count from 1 to 5." }], ...TEXT_REPLY },
    validators: [streamingEvents, completedStatus],
  },
  {
    id: "system-prompt",
    request: {
      input: [
        { type: "message", role: "system", content: "You are a pirate. Always respond in pirate speak." },
        { type: "message", role: "user", content: "Say hello." },
      ],
      ...TEXT_REPLY,
    },
    validators: [hasOutput, completedStatus],
  },
  {
    id: "tool-calling",
    request: { input: WEATHER_QUESTION, tools: [WEATHER_TOOL], ...FORCED_CALL },
    validators: [hasOutput, hasOutputType("function_call")],
  },
  {
    id: "tool-calling-streaming",
    streaming: true,
    request: { input: WEATHER_QUESTION, tools: [WEATHER_TOOL], ...FORCED_CALL },
    validators: [streamingEvents, functionCallEvents],
  },
  {
    id: "multi-turn",
    request: {
      input: [
        { type: "message", role: "user", content: "My name is Alice." },
        {
          type: "message",
          role: "assistant",
          content: "Hello Alice! Nice to meet you. How can I help you today?",
        },
        { type: "message", role: "user", content: "What is my name?" },
      ],
      ...TEXT_REPLY,
    },
    validators: [hasOutput, completedStatus],
  },
];

/** A PNG as a data URL: `size` x `size` red pixels (8-bit RGB, no filter), as the image-input template sends one. */
function redPng(size: number): string {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc32 = (bytes: Buffer) => {
    let c = 0xffffffff;
    for (const b of bytes) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array(size).fill([255, 0, 0]).flat())]);
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(Array(size).fill(row)))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
  return `data:image/png;base64,${png.toString("base64")}`;
}

/** Server-sent events as the suite's parser reads them: `event:` and `data:` lines, a blank line ending each. */
function parseSse(body: string): { events: SseEvent[]; errors: string[] } {
  const events: SseEvent[] = [];
  const errors: string[] = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    let event = "";
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trim());
    }
    if (data.length === 0 || data.join("\n") === "[DONE]") continue;
    try {
      const parsed = JSON.parse(data.join("\n")) as Json;
      events.push({ event: event || parsed.type, data: parsed });
    } catch {
      errors.push(`Failed to parse event data: ${data.join("\n")}`);
    }
  }
  return { events, errors };
}

const TERMINAL = new Set(["response.completed", "response.failed", "response.incomplete"]);

/** Runs one template as the suite's runTest does; the errors it found (none: passed). */
async function runTemplate(s: LlamaServer, template: Template): Promise<string[]> {
  const streaming = template.streaming ?? false;
  const res = await fetch(`${s.server.url}/v1/responses`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer unused" },
    body: JSON.stringify({ model: s.model, ...template.request, stream: streaming }),
  });
  if (!res.ok) return [`HTTP ${res.status}: ${await res.text()}`];
  let response: Json = null;
  let events: SseEvent[] = [];
  const errors: string[] = [];
  if (streaming) {
    const parsed = parseSse(await res.text());
    events = parsed.events;
    errors.push(...parsed.errors);
    for (const [i, { event, data }] of events.entries()) {
      const where = `events[${i}](${data.type})`;
      errors.push(...schemaErrors(streamingEventSchema, data, where));
      // Beyond the suite: the SSE event name and the order of the sequence numbers
      if (event !== data.type) errors.push(`${where}: event line "${event}" but type "${data.type}"`);
      if (data.sequence_number !== i)
        errors.push(`${where}.sequence_number: expected ${i}, got ${data.sequence_number}`);
      if (TERMINAL.has(data.type)) response = data.response;
    }
  } else {
    response = await res.json();
  }
  const responseErrors = schemaErrors(responseResourceSchema, response, "response");
  // As in the suite: a response that fails the schema is not checked further
  if (responseErrors.length > 0) return [...errors, ...responseErrors];
  const context = { streaming, events };
  return [...errors, ...template.validators.flatMap((validate) => validate(response, context))];
}

describe("Open Responses compliance checks against continuum serve (real engine, tiny model)", {
  skip: llamaSkip,
}, () => {
  let s: LlamaServer;
  before(async () => {
    s = await startLlamaServer(["--logit-bias", "eos+5"]);
  });
  after(() => s?.close());

  for (const template of TEMPLATES) {
    test(template.id, async () => {
      assert.deepEqual(await runTemplate(s, template), [], `${template.id}: compliance errors`);
    });
  }

  test("beyond the suite: text.format json_schema, streamed, gives JSON of that schema and echoes the format", async () => {
    const schema = {
      type: "object",
      properties: { ok: { type: "boolean" } },
      required: ["ok"],
      additionalProperties: false,
    };
    const format = { type: "json_schema", name: "answer", schema, strict: true };
    const template: Template = {
      id: "structured-output",
      streaming: true,
      request: { input: "Is the sky blue? Answer as JSON.", text: { format }, ...TEXT_REPLY },
      validators: [
        completedStatus,
        (response) => {
          const text = response.output.find((item: Json) => item.type === "message")?.content[0]?.text ?? "";
          const parsed = JSON.parse(text) as Json;
          const errors = typeof parsed.ok === "boolean" && Object.keys(parsed).length === 1 ? [] : [text];
          return response.text.format.name === "answer" ? errors : [...errors, "text.format not echoed"];
        },
      ],
    };
    assert.deepEqual(await runTemplate(s, template), [], "structured-output: compliance errors");
  });

  test("image-input: refused with a 400 naming the image part (the tiny model has no vision)", async () => {
    const res = await fetch(`${s.server.url}/v1/responses`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer unused" },
      body: JSON.stringify({
        model: s.model,
        input: [
          {
            type: "message",
            role: "user",
            content: [
              { type: "input_text", text: "What do you see in this image? Answer in one sentence." },
              { type: "input_image", image_url: redPng(32) },
            ],
          },
        ],
      }),
    });
    assert.equal(res.status, 400);
    const { error } = (await res.json()) as Json;
    assert.equal(error.type, "invalid_request_error");
    assert.equal(error.code, "unsupported_value");
    assert.equal(error.param, "input[0].content[1]");
    assert.match(
      error.message,
      /image content is not supported: the served model reads text only .*--media-inputs note/,
    );
  });
});
