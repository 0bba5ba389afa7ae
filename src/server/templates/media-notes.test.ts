/**
 * `serve --media-inputs note`: an agent session that attached an image goes on with a text model (each
 * image, audio clip or file becomes a note in the prompt, the same on every turn, so the program's prefix
 * stays cached), in all three APIs; without the flag such parts are a 400 that names the flag.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type Json, withServer } from "../test-support/test-server.js";
import { mediaNote, noteMedia } from "./media-notes.js";

const PNG = "data:image/png;base64,iVBORw0KGgo=";
const NOTE_PNG = "[image (image/png) not shown: the served model reads text only]";

describe("media notes", () => {
  test("a note names what the part says of itself, never its bytes", () => {
    assert.equal(mediaNote("image", { image_url: { url: PNG } }), NOTE_PNG);
    assert.equal(
      mediaNote("image", { source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } }),
      "[image (image/jpeg) not shown: the served model reads text only]",
    );
    assert.equal(
      mediaNote("image", { image_url: "https://example.com/shot.png" }),
      "[image (https://example.com/shot.png) not shown: the served model reads text only]",
    );
    assert.equal(
      mediaNote("file", { file: { filename: "report.pdf", file_data: "JVBERi0=" } }),
      "[file (report.pdf) not shown: the served model reads text only]",
    );
    assert.equal(mediaNote("audio", {}), "[audio not shown: the served model reads text only]");
  });

  test("each API's media parts are replaced where that API puts them, text and tool calls left alone", () => {
    const chat = noteMedia("chat", {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "look" },
            { type: "image_url", image_url: { url: PNG } },
          ],
        },
        { role: "assistant", content: "ok" },
      ],
    });
    assert.equal(chat.replaced, 1);
    assert.deepEqual((chat.body as Json).messages[0].content[1], { type: "text", text: NOTE_PNG });
    assert.equal((chat.body as Json).messages[1].content, "ok");

    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } };
    const messages = noteMedia("messages", {
      messages: [
        { role: "user", content: [image, { type: "text", text: "what is it?" }] },
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "t1", name: "Read", input: { path: "a.png" } }],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: [image] }] },
      ],
    });
    assert.equal(messages.replaced, 2);
    const m = (messages.body as Json).messages;
    assert.deepEqual(m[0].content[0], { type: "text", text: NOTE_PNG });
    assert.deepEqual(m[2].content[0].content, [{ type: "text", text: NOTE_PNG }]);
    assert.equal(m[2].content[0].tool_use_id, "t1");

    const responses = noteMedia("responses", {
      input: [
        { type: "message", role: "user", content: [{ type: "input_image", image_url: PNG }] },
        { type: "function_call_output", call_id: "c", output: [{ type: "input_image", image_url: PNG }] },
        { type: "function_call_output", call_id: "d", output: "plain" },
      ],
    });
    assert.equal(responses.replaced, 2);
    const items = (responses.body as Json).input;
    assert.deepEqual(items[0].content, [{ type: "input_text", text: NOTE_PNG }]);
    assert.deepEqual(items[1].output, [{ type: "input_text", text: NOTE_PNG }]);
    assert.equal(items[2].output, "plain");
  });
});

describe("serving with --media-inputs note (fake engine)", () => {
  const claudeTurn = (history: Json[]) => ({ model: "fake-model", max_tokens: 16, messages: history });
  const screenshot = { type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } };

  test("a Claude Code session that read an image goes on, and its next turn finds its prefix cached", async () => {
    await withServer({ reply: () => "It shows a chart." }, { mediaInputs: "note" }, async (t) => {
      const session = { "x-claude-code-session-id": "s-1" };
      const first = [
        { role: "user", content: "Read the screenshot" },
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "t1", name: "Read", input: { file: "a.png" } }],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: [screenshot] }] },
      ];
      const one = await t.post("/v1/messages", claudeTurn(first), session);
      assert.equal(one.status, 200);
      assert.match(
        t.engine.requests.at(-1)?.prompt ?? "",
        /\[image \(image\/png\) not shown: the served model reads text only\]/,
      );
      const second = [
        ...first,
        { role: "assistant", content: "It shows a chart." },
        { role: "user", content: "thanks" },
      ];
      const two = await t.post("/v1/messages", claudeTurn(second), session);
      assert.equal(two.status, 200);
      const usage = ((await two.json()) as Json).usage;
      const firstPrompt =
        t.engine.requests
          .at(-2)
          ?.prompt.split(/\s+/)
          .filter((w) => w !== "").length ?? 0;
      assert.ok(
        usage.cache_read_input_tokens >= firstPrompt,
        `${usage.cache_read_input_tokens} of ${firstPrompt}`,
      );
    });
  });

  test("chat completions and responses take images as notes too", async () => {
    await withServer({}, { mediaInputs: "note" }, async (t) => {
      const chat = await t.post("/v1/chat/completions", {
        model: "fake-model",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "see" },
              { type: "image_url", image_url: { url: PNG } },
            ],
          },
        ],
      });
      assert.equal(chat.status, 200);
      assert.match(t.engine.requests.at(-1)?.prompt ?? "", /\[image \(image\/png\) not shown/);
      const responses = await t.post("/v1/responses", {
        model: "fake-model",
        input: [{ type: "message", role: "user", content: [{ type: "input_image", image_url: PNG }] }],
      });
      assert.equal(responses.status, 200);
      assert.match(t.engine.requests.at(-1)?.prompt ?? "", /\[image \(image\/png\) not shown/);
    });
  });

  test("a PDF a Claude Code Read returned is a note with the flag, and a 400 naming it without", async () => {
    const pdf = {
      type: "document",
      source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" },
    };
    const history = [{ role: "user", content: [{ type: "text", text: "summarize" }, pdf] }];
    await withServer({}, { mediaInputs: "note" }, async (t) => {
      assert.equal((await t.post("/v1/messages", claudeTurn(history))).status, 200);
      assert.match(t.engine.requests.at(-1)?.prompt ?? "", /\[document \(application\/pdf\) not shown/);
    });
    await withServer({}, {}, async (t) => {
      const response = await t.post("/v1/messages", claudeTurn(history));
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as Json;
      assert.match(
        error.message,
        /^messages\[0\]\.content\[1\]: document content is not supported: .*--media-inputs note/,
      );
    });
  });

  test("without the flag an image is a 400 that names the part and the flag", async () => {
    await withServer({}, {}, async (t) => {
      const response = await t.post("/v1/chat/completions", {
        model: "fake-model",
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: PNG } }] }],
      });
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as Json;
      assert.equal(error.param, "messages[0].content[0]");
      assert.match(
        error.message,
        /^image content is not supported: the served model reads text only .*--media-inputs note/,
      );
    });
  });
});
