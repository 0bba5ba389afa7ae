/**
 * A reasoning model on /v1/responses (Codex's API): its thinking as a reasoning item before the message and
 * calls (streamed as reasoning_text deltas), every streamed event and the response resource checked against
 * the Open Responses schema.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { qwen3ChatTemplate } from "../test-support/llama-templates.js";
import {
  responseResourceSchema,
  schemaErrors,
  streamingEventSchema,
} from "../test-support/open-responses-schema.js";
import { type Json, withServer } from "../test-support/test-server.js";

const call = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>';

test("responses (Codex's API): a reasoning item before the call, whole and streamed, as Open Responses specifies", async () => {
  const reply = () => [`<think>\nNeed`, ` ls.\n</think>\n\n`, call];
  await withServer({ chatTemplate: qwen3ChatTemplate(), reply }, {}, async (t) => {
    const request = {
      model: "fake-model",
      input: "List the files.",
      tools: [{ type: "function", name: "bash", parameters: { type: "object", properties: {} } }],
    };
    const whole = (await (await t.post("/v1/responses", request)).json()) as Json;
    assert.deepEqual(schemaErrors(responseResourceSchema, whole), []);
    assert.deepEqual(
      whole.output.map((item: Json) => item.type),
      ["reasoning", "function_call"],
    );
    assert.deepEqual(whole.output[0].content, [{ type: "reasoning_text", text: "Need ls." }]);
    const sse = await (await t.post("/v1/responses", { ...request, stream: true })).text();
    const frames = sse
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as Json);
    for (const frame of frames) assert.deepEqual(schemaErrors(streamingEventSchema, frame), [], frame.type);
    const done = frames.filter((f) => f.type === "response.output_item.done").map((f) => f.item);
    assert.deepEqual(
      done.map((item: Json) => item.type),
      ["reasoning", "function_call"],
    );
    assert.equal(done[0].content[0].text, "Need ls.");
    // Codex shows the thinking as it comes: deltas of the reasoning_text part, adding up to the item's text
    const reasoningId = done[0].id;
    const ofReasoning = frames.filter((f) => f.item_id === reasoningId || f.item?.id === reasoningId);
    assert.deepEqual(
      ofReasoning.map((f) => f.type),
      [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
      ],
    );
    const deltas = ofReasoning.filter((f) => f.type === "response.reasoning_text.delta").map((f) => f.delta);
    assert.deepEqual(deltas, ["Need", " ls."]);
    assert.equal(ofReasoning.find((f) => f.type === "response.reasoning_text.done").text, "Need ls.");
    const completed = frames.at(-1)!;
    assert.equal(completed.type, "response.completed");
    assert.equal(completed.response.output[0].type, "reasoning");
  });
});
