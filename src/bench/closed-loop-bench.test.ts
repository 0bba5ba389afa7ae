/**
 * End to end: AgentX's closed loop against `continuum serve`'s engine (tiny built-in model, llama.cpp) in
 * process on 127.0.0.1: prompts built from block ids reach the server at the trace's lengths, the server's
 * prefix cache finds the sharing the ids say (never more), and a call past the model's context counts as
 * an overflow.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { createLlamaEngine } from "../engine/engine-factory.js";
import { isNativeAvailable } from "../engine/native/llama-native.js";
import { startServer } from "../server/server.js";
import { runClosedLoopBench } from "./closed-loop-bench.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();

/** A Weka session: calls of 256, 512, 768... tokens whose ids extend each other; one call past 4096. */
function session(id: string, overflow: boolean) {
  const call = (i: number, input: number) => ({
    t: i * 2,
    type: "n",
    model: "m",
    in: input,
    out: 8,
    hash_ids: Array.from({ length: Math.ceil(input / 64) }, (_, k) => k + 1),
    stop: "tool_use",
    api_time: 1,
    think_time: 0.2,
  });
  const inputs = [256, 512, 768, 1024, ...(overflow ? [5000] : []), 1280];
  return {
    id,
    models: ["m"],
    block_size: 64,
    hash_id_scope: "local",
    requests: inputs.map((input, i) => call(i, input)),
  };
}

describe("bench --concurrency against the server (tiny built-in model)", {
  skip: supported ? false : "no llama.cpp addon",
}, () => {
  test("replays session trees in a closed loop and measures AgentX's metrics", async () => {
    const dir = await mkdtemp(join(tmpdir(), "closed-loop-bench-"));
    try {
      await writeFile(join(dir, "a.json"), JSON.stringify(session("a", true)));
      await writeFile(join(dir, "b.json"), JSON.stringify(session("b", false)));
      const engine = await createLlamaEngine({
        builtinModel: "tiny",
        threads: 1,
        threadsBatch: 1,
        maxNumSeqs: 4,
        kvCacheTokens: 16384,
        maxSeqSlots: 24,
        policy: "cachettl-adaptive",
      });
      const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
      let run: Awaited<ReturnType<typeof runClosedLoopBench>>;
      try {
        run = await runClosedLoopBench({
          url: server.url,
          api: "completions",
          tracePaths: [dir],
          tokenScale: 1,
          // the trace's 2 s between calls made 0.5 s: the loop needs a few sessions' calls, not their pace
          timeScale: 0.25,
          concurrency: 2,
          durationS: 8,
          warmStart: false,
          idleGapCapS: 10,
          interactivityFloor: 50,
          seed: 2,
          requestTimeoutS: 60,
          devices: 1,
          deviceKind: "cpu-core",
          label: "tiny",
        });
      } finally {
        await server.close({ drainTimeoutMs: 2_000 });
      }
      const m = run.metrics;
      assert.deepEqual(run.errors, {});
      // later prompts carry the replies the model wrote, which vary with the batches they were decoded in and
      // retokenize a token or two off; a prompt built wrong is off by tens
      assert.ok(
        run.prompt_tokens_mae !== null && run.prompt_tokens_mae <= 4,
        `prompt MAE ${run.prompt_tokens_mae}`,
      );
      assert.ok(m.requests.completed >= 6, JSON.stringify(m.requests));
      assert.ok(m.context_overflow.requests >= 1, "the 5000-token call overflows the 4096-token context");
      assert.ok(m.theoretical_prefix_hit > 0.4, `theoretical ${m.theoretical_prefix_hit}`);
      assert.ok(m.prefix_hit > 0.3, `achieved ${m.prefix_hit}`);
      assert.ok(
        m.prefix_hit <= m.theoretical_prefix_hit + 0.02,
        `${m.prefix_hit} > ${m.theoretical_prefix_hit}`,
      );
      assert.ok(m.ttft_s.p50 > 0 && m.itl_s.p50 > 0 && m.tpgs > 0);
      assert.equal(m.device_kind, "cpu-core");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
