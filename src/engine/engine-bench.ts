/**
 * Decode throughput of the llama.cpp engine on a built-in model, with 1 and N concurrent requests, and
 * the engine's own per-step overhead (step wall time minus llama.cpp's decode + sampling time).
 *
 *   node --import tsx src/engine/engine-bench.ts [--preset tiny|small|medium] [--threads 1] [--tokens 128]
 *                                                [--concurrency 1,8]
 */
import { parseArgs } from "node:util";
import { Engine } from "./engine.js";
import { type BuiltinPreset, ensureBuiltinModel } from "./gguf/index.js";
import { LlamaModelRunner } from "./llama-model-runner.js";
import { chat, request, run } from "./test-support/engine-helpers.js";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "tiny" },
    threads: { type: "string", default: "1" },
    tokens: { type: "string", default: "128" },
    concurrency: { type: "string", default: "1,8" },
  },
});
const preset = values.preset as BuiltinPreset;
const threads = Number(values.threads);
const maxTokens = Number(values.tokens);
const levels = (values.concurrency as string).split(",").map(Number);

const runner = await LlamaModelRunner.open({
  modelPath: await ensureBuiltinModel({ preset }),
  kvCells: 8192,
  maxSeqs: 16,
  batchTokens: 512,
  threads,
});
const engine = new Engine({ runner, policy: "vllm", maxNumSeqs: 8, maxNumBatchedTokens: 512 });
const prompt = (i: number) =>
  engine.renderChat(
    chat(`request ${i}: ${"summarise the repository layout and the failing tests ".repeat(6)}`),
  );
const sampling = { maxTokens, ignoreEos: true };
await run(engine, request("warmup", prompt(-1), { sampling: { maxTokens: 16, ignoreEos: true } }));

console.log(`preset ${preset}, threads ${threads}, ${maxTokens} output tokens per request, greedy`);
for (const c of levels) {
  const before = { ...engine.loopStats };
  const decodeCallsBefore = runner.decodeCalls;
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: c }, (_, i) => run(engine, request(`c${c}-${i}`, prompt(i), { sampling }))),
  );
  const wallS = (performance.now() - t0) / 1000;
  const tokens = results.reduce((n, r) => n + r.done.usage.completionTokens, 0);
  const s = engine.loopStats;
  const steps = s.steps - before.steps;
  const stepWallMs = ((s.stepWallS - before.stepWallS) / steps) * 1000;
  const computeMs = ((s.computeS - before.computeS) / steps) * 1000;
  const loopMs = (wallS / steps) * 1000;
  console.log(
    [
      `concurrency ${c}: ${tokens} tokens in ${wallS.toFixed(2)} s = ${(tokens / wallS).toFixed(1)} tok/s`,
      `  ${steps} steps (${runner.decodeCalls - decodeCallsBefore} llama_decode calls), per step: wall ${loopMs.toFixed(2)} ms,`,
      `  in step() ${stepWallMs.toFixed(2)} ms, llama decode+sample ${computeMs.toFixed(2)} ms,`,
      `  TS overhead ${(stepWallMs - computeMs).toFixed(3)} ms in step + ${(loopMs - stepWallMs).toFixed(3)} ms between steps`,
    ].join("\n"),
  );
}
await engine.shutdown();
