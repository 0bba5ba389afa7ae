/**
 * End to end: the official `openai` npm SDK against `continuum serve` running the real llama.cpp engine
 * (built-in tiny model, threads 1) on 127.0.0.1. The program fields travel as Python's `extra_body`
 * does (merged top-level into the JSON body), and their effect is checked where it shows: the fork's
 * policy pins a non-last turn (/metrics, the event log) and the last step frees it.
 */
import assert from "node:assert/strict";
import { cpus, totalmem } from "node:os";
import { after, before, describe, test } from "node:test";
import type OpenAI from "openai";
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from "openai/resources/chat/completions";
import type { RecorderEvent } from "../../core/recorder/events.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { BUILTIN_PRESETS } from "../../gguf/index.js";
import { type LlamaServer, startLlamaServer, withExtraBody } from "../test-support/llama-server.js";

const messages = [
  { role: "system" as const, content: "Respond with ONLY a ```bash``` block." },
  { role: "user" as const, content: "List files with ls." },
];
const MAX_TOKENS = 16;

describe("openai SDK against the llama.cpp engine (tiny model)", { skip: llamaSkip }, () => {
  let s: LlamaServer;
  let chatPromptTokens = 0;

  before(async () => {
    s = await startLlamaServer(["--scheduling-policy", "continuum-heuristic", "--kv-cache-tokens", "2048"]);
  });
  // close() is idempotent: the last test closes the server to read its event log
  after(() => s?.close());

  test("the banner and /metrics say where it runs: this machine's CPU and RAM, the KV cache in RAM", async () => {
    const cpu = cpus()[0]!.model.trim();
    const ram = `${(totalmem() / 1024 ** 3).toFixed(1)} GiB RAM`;
    assert.ok(
      s.banner.includes(`  device: cpu · ${cpu} · ${ram} · KV cache in RAM`),
      `banner:\n${s.banner.join("\n")}`,
    );
    const text = await (await fetch(`${s.server.url}/metrics`)).text();
    const sample = /^continuum:device_info\{(.*)\} (\S+)$/m.exec(text);
    assert.ok(sample, "continuum:device_info is exported");
    const labels = Object.fromEntries([...sample[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    assert.deepEqual(labels, {
      backend: "cpu",
      device: cpu,
      memory_bytes: String(totalmem()),
      layers_offloaded: "0",
      layers_total: String(BUILTIN_PRESETS.tiny.blockCount),
      kv_cache: "cpu",
      model_name: s.model,
    });
    assert.equal(sample[2], "1");
  });

  test("chat completion with extra_body { job_id, is_last_step: false }: a non-last turn is pinned", async () => {
    const params = withExtraBody<ChatCompletionCreateParamsNonStreaming>(
      { model: s.model, messages, max_tokens: MAX_TOKENS, temperature: 0 },
      { job_id: "job_alpha", is_last_step: false, ignore_eos: true },
    );
    const response = await s.openai.chat.completions.create(params);
    assert.equal(response.object, "chat.completion");
    assert.equal(response.model, s.model);
    const choice = response.choices[0]!;
    assert.equal(choice.message.role, "assistant");
    assert.equal(typeof choice.message.content, "string");
    assert.ok(choice.message.content!.length > 0);
    assert.equal(choice.finish_reason, "length");
    const usage = response.usage!;
    assert.equal(usage.completion_tokens, MAX_TOKENS);
    assert.ok(usage.prompt_tokens > 10, `prompt tokens ${usage.prompt_tokens}`);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    assert.equal(usage.prompt_tokens_details?.cached_tokens, 0);
    chatPromptTokens = usage.prompt_tokens;

    // job_id and is_last_step reached the scheduler: the fork's rule pins the turn for 2 s.
    const m = await s.metrics();
    assert.equal(m["continuum:num_pinned_programs"], 1);
    assert.ok(m["continuum:kv_cache_usage_perc"]! > 0);
  });

  test("streamed chat (stream_options.include_usage) with extra_body { job_id, is_last_step: true }", async () => {
    const params = withExtraBody<ChatCompletionCreateParamsStreaming>(
      {
        model: s.model,
        messages,
        max_tokens: MAX_TOKENS,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      },
      { job_id: "job_alpha", is_last_step: true, ignore_eos: true },
    );
    const stream = await s.openai.chat.completions.create(params);
    let text = "";
    let contentChunks = 0;
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null = null;
    let chunksAfterUsage = 0;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      if (usage) chunksAfterUsage++;
      const choice = chunk.choices[0];
      if (choice?.delta.content) {
        text += choice.delta.content;
        contentChunks++;
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) {
        assert.deepEqual(chunk.choices, [], "the usage chunk has no choices");
        usage = chunk.usage;
      }
    }
    assert.ok(contentChunks >= 3, `content arrived in ${contentChunks} chunk(s)`);
    assert.equal(finish, "length");
    assert.equal(chunksAfterUsage, 0, "usage is the final chunk");
    assert.ok(usage, "final usage chunk");
    assert.equal(usage.completion_tokens, MAX_TOKENS);
    assert.equal(usage.prompt_tokens, chatPromptTokens);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    // Not compared with the non-streamed text: this answer is computed over the pinned prefix (a batch of
    // the suffix only), that one from scratch, and ggml's AVX-512 kernels round the two shapes differently.
    assert.ok(text.length > 0, "the streamed deltas carry text");
    const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
    assert.ok(cached > 0 && cached < usage.prompt_tokens, `cached tokens ${cached}`);

    // The last step frees the program's KV at once.
    const m = await s.metrics();
    assert.equal(m["continuum:num_pinned_programs"], 0);
    assert.equal(m["continuum:kv_cache_usage_perc"], 0);
  });

  test("the event log names the program and shows one pin, released by the last step", async () => {
    const events: RecorderEvent[] = await s.close();
    const mine = events.filter((e) => e.programId === "job_alpha");
    assert.deepEqual(
      mine
        .filter((e) => e.kind === "arrival" || e.kind === "pinned" || e.kind === "unpinned")
        .map((e) => e.kind),
      ["arrival", "pinned", "arrival", "unpinned"],
    );
    const pinned = mine.find((e) => e.kind === "pinned");
    assert.ok(pinned?.kind === "pinned" && pinned.ttlS === 2);
    const unpinned = mine.find((e) => e.kind === "unpinned");
    assert.ok(unpinned?.kind === "unpinned" && unpinned.reason === "reused");
  });
});
