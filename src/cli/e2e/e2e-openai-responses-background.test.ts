/**
 * End to end: background responses through the official `openai` SDK against `continuum serve` (real
 * engine, built-in tiny model): `background: true` polled with `responses.retrieve` to its end, its input
 * items listed, and `responses.cancel` stopping a long generation, whose engine request ends at once and
 * whose KV is released.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { BadRequestError } from "openai";
import type { Response } from "openai/resources/responses/responses";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { type LlamaServer, sleep, startLlamaServer, withExtraBody } from "../test-support/llama-server.js";

async function until<T>(what: string, probe: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const value = await probe();
    if (done(value)) return value;
    await sleep(50);
  }
  assert.fail(`timed out waiting for ${what}`);
}

const live = (response: Response) => response.status === "queued" || response.status === "in_progress";

describe("openai SDK background responses against continuum serve (real engine, tiny model)", {
  skip: llamaSkip,
}, () => {
  let s: LlamaServer;
  before(async () => {
    s = await startLlamaServer(["--max-num-seqs", "2"]);
  });
  after(() => s?.close());

  test("background: returned queued, polled to its end; its input items listed", async () => {
    const created = await s.openai.responses.create({
      model: s.model,
      input: "List files with ls.",
      background: true,
      max_output_tokens: 8,
      temperature: 0,
    });
    assert.ok(live(created), created.status);
    assert.equal(created.background, true);
    assert.equal((created as { store?: boolean }).store, true);
    const ended = await until(
      "the response to end",
      () => s.openai.responses.retrieve(created.id),
      (r) => !live(r),
    );
    assert.ok(ended.status === "completed" || ended.status === "incomplete", ended.status);
    assert.ok(ended.output_text.length > 0);
    assert.ok(ended.usage!.output_tokens <= 8);
    const items = [];
    for await (const item of s.openai.responses.inputItems.list(created.id)) items.push(item);
    assert.equal(items.length, 1);
    assert.deepEqual((items[0] as { content: unknown }).content, [
      { type: "input_text", text: "List files with ls." },
    ]);
    await assert.rejects(s.openai.responses.cancel(created.id), BadRequestError);
  });

  test("cancel: a long background generation stops at once, its engine request gone, its KV released", async () => {
    const idle = await s.metrics();
    const generated = () => s.engine.metrics().generatedTokens;
    const generatedBefore = generated();
    const created = await s.openai.responses.create(
      withExtraBody(
        { model: s.model, input: "Count to a million.", background: true, temperature: 0 },
        { ignore_eos: true },
      ),
    );
    await until(
      "the generation to run",
      () => s.openai.responses.retrieve(created.id),
      (r) => r.status === "in_progress",
    );
    const running = await s.metrics();
    assert.equal(running["continuum:num_requests_running"], 1);
    assert.ok(running["continuum:kv_cache_usage_perc"]! > idle["continuum:kv_cache_usage_perc"]!);

    const cancelled = await s.openai.responses.cancel(created.id);
    assert.equal(cancelled.status, "cancelled");
    assert.deepEqual(cancelled.output, []);
    const after = await until(
      "the engine to let the request go",
      () => s.metrics(),
      (m) => m["continuum:num_requests_running"] === 0,
    );
    assert.ok(
      after["continuum:kv_cache_usage_perc"]! < running["continuum:kv_cache_usage_perc"]!,
      `KV usage ${after["continuum:kv_cache_usage_perc"]} after the cancel, ${running["continuum:kv_cache_usage_perc"]} before`,
    );
    // the whole context's room takes the tiny model half a minute on a CPU; cancelled at its start
    const sampled = generated() - generatedBefore;
    assert.ok(sampled < 1_000, `${sampled} tokens sampled of a ${s.engine.maxContextTokens}-token context`);
    await sleep(300);
    assert.equal(generated() - generatedBefore, sampled, "no token is sampled after the cancel");
    const retrieved = await s.openai.responses.retrieve(created.id);
    assert.equal(retrieved.status, "cancelled");
    assert.equal((await s.openai.responses.cancel(created.id)).status, "cancelled");
    await until(
      "the run to end",
      async () => s.server.api.inflight.size,
      (size) => size === 0,
    );
  });
});
