/**
 * A turn's own output is cache on the program's next turn: the client sends the reply back as text, and
 * the KV of the tokens the model generated is reused rather than computed again (src/engine/text/turn-continuation.ts).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type OpenAI from "openai";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { startLlamaServer } from "../test-support/llama-server.js";

const BLOCK = 16;

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

describe("the model's own output is cache next turn (real engine, tiny model)", { skip: llamaSkip }, () => {
  // byte-level BPE (Llama 3, Qwen) splits a reply's text anew otherwise than the sampler did
  for (const tokenizer of ["spm", "bpe"] as const)
    test(`each turn's cached tokens cover the previous prompt and the previous reply, but for the last block (${tokenizer} tokenizer)`, async () => {
      const model =
        tokenizer === "spm" ? [] : ["--model", await ensureBuiltinModel({ preset: "tiny", tokenizer })];
      const s = await startLlamaServer([
        "--scheduling-policy",
        "cachettl",
        "--cpu-offload-gb",
        "0",
        ...model,
      ]);
      try {
        const messages: Message[] = [
          { role: "system", content: "You are a careful agent working in a repository." },
          { role: "user", content: "List the files, then read the one that fails its test." },
        ];
        let previous: { prompt: number; completion: number } | null = null;
        for (let turn = 0; turn < 4; turn++) {
          const response = await s.openai.chat.completions.create(
            { model: s.model, messages, max_tokens: 40, temperature: 0 },
            { headers: { "x-program-id": "agent-output-reuse" } },
          );
          const usage = response.usage!;
          const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
          if (previous) {
            // the last generated token was sampled, never fed: its KV does not exist yet
            const reusable = Math.floor((previous.prompt + previous.completion - 1) / BLOCK) * BLOCK;
            assert.ok(
              cached >= reusable,
              `turn ${turn}: ${cached} cached of ${usage.prompt_tokens}; the previous turn held ${previous.prompt} + ${previous.completion}`,
            );
          }
          previous = { prompt: usage.prompt_tokens, completion: usage.completion_tokens };
          messages.push({ role: "assistant", content: response.choices[0]!.message.content ?? "" });
          messages.push({ role: "user", content: `Observation ${turn}: 3 files changed, 1 test failed.` });
        }
      } finally {
        await s.close();
      }
    });

  test("a conversation of the Conversations API reuses each turn's prompt and reply the same way", async () => {
    const s = await startLlamaServer(["--scheduling-policy", "cachettl", "--cpu-offload-gb", "0"]);
    try {
      const conversation = await s.openai.conversations.create({
        items: [
          { type: "message", role: "system", content: "You are a careful agent working in a repository." },
        ],
      });
      let previous: { prompt: number; completion: number } | null = null;
      for (let turn = 0; turn < 4; turn++) {
        const response = await s.openai.responses.create({
          model: s.model,
          conversation: conversation.id,
          input: turn === 0 ? "List the files." : `Observation ${turn}: 3 files changed, 1 test failed.`,
          max_output_tokens: 40,
          temperature: 0,
        });
        const usage = response.usage!;
        if (previous) {
          const reusable = Math.floor((previous.prompt + previous.completion - 1) / BLOCK) * BLOCK;
          const cached = usage.input_tokens_details.cached_tokens;
          assert.ok(
            cached >= reusable,
            `turn ${turn}: ${cached} cached of ${usage.input_tokens}; the previous turn held ${previous.prompt} + ${previous.completion}`,
          );
        }
        previous = { prompt: usage.input_tokens, completion: usage.output_tokens };
      }
    } finally {
      await s.close();
    }
  });
});
