/**
 * A model that ships a template for requests with tools apart from its default one
 * (`tokenizer.chat_template.tool_use`: Hermes 2 Pro and 3, Command R) has requests that offer tools rendered
 * with it, as llama-server does, and the others with the default one.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import type { ModelChatTemplate } from "../../engine/engine-api.js";
import { isNativeAvailable } from "../../engine/native/llama-native.js";
import { LlamaModelRunner } from "../../engine/runners/llama-model-runner.js";
import { writeTemplateGguf } from "../../engine/test-support/template-gguf.js";
import { BASH_TOOL } from "../test-support/chat-fixtures.js";
import { llamaTemplate } from "../test-support/llama-templates.js";
import { type Json, withServer } from "../test-support/test-server.js";

/** Hermes 3's default template: ChatML, no tools */
const PLAIN =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const TOOL_USE = () => llamaTemplate("NousResearch-Hermes-3-Llama-3.1-8B-tool_use");

const tools = [BASH_TOOL];
const messages = [{ role: "user", content: "List the files." }];

describe("a model's tool_use template", () => {
  test("the runner reads it from the GGUF beside the default one", {
    skip: isNativeAvailable() ? false : "no llama.cpp addon",
  }, async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-tool-use-"));
    try {
      const modelPath = join(dir, "hermes.gguf");
      await writeTemplateGguf(modelPath, PLAIN, { "tokenizer.chat_template.tool_use": TOOL_USE() });
      const runner = await LlamaModelRunner.open({ modelPath, kvCells: 256, maxSeqs: 1, threads: 1 });
      assert.equal(runner.chatTemplate.source, PLAIN);
      assert.equal(runner.chatTemplate.toolUseSource, TOOL_USE());
      await runner.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("requests that offer tools render with it, the others with the default template", async () => {
    const chatTemplate: ModelChatTemplate = {
      source: PLAIN,
      toolUseSource: TOOL_USE(),
      bosToken: "<|begin_of_text|>",
      eosToken: "<|im_end|>",
      eosTokenId: 2,
      addsBos: true,
    };
    const call = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>';
    await withServer({ chatTemplate, reply: () => call }, {}, async (t) => {
      const withTools = (await (await t.post("/v1/chat/completions", { messages, tools })).json()) as Json;
      assert.match(t.engine.requests[0]!.prompt, /You are a function calling AI model[\s\S]*"name": "bash"/);
      assert.equal(withTools.choices[0].message.tool_calls[0].function.name, "bash");
      await t.post("/v1/chat/completions", { messages });
      assert.equal(
        t.engine.requests[1]!.prompt,
        "<|im_start|>user\nList the files.<|im_end|>\n<|im_start|>assistant\n",
      );
    });
  });

  test("--chat-template overrides both", async () => {
    const chatTemplate: ModelChatTemplate = {
      source: PLAIN,
      toolUseSource: TOOL_USE(),
      bosToken: "",
      eosToken: "<|im_end|>",
      eosTokenId: 2,
      addsBos: false,
    };
    const override =
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}({{ tools | length }} tools)";
    await withServer({ chatTemplate, reply: () => "ok" }, { chatTemplate: override }, async (t) => {
      await t.post("/v1/chat/completions", { messages, tools });
      assert.equal(t.engine.requests[0]!.prompt, "[user] List the files.(1 tools)");
    });
  });
});
