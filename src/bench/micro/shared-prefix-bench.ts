/**
 * Programs that open with the same long instructions (an agent harness's system prompt and tools, an RL
 * rollout's task) on a sliding-window model, one after another, in both KV layouts side by side: the second
 * program computes the prefix again and leaves a checkpoint of it, which the later ones copy
 * (docs/engine.md). Prints per layout the prompt tokens, those reported cached, those computed, what the
 * checkpoints keep, and the wall time (a generated gemma3-arch model on the CPU).
 *
 * Usage: node --import tsx src/bench/micro/shared-prefix-bench.ts [--programs 8] [--prefix-words 1400]
 *        [--window 128] [--threads 2]
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { formatTextTable } from "../../analysis/text-table.js";
import { Engine } from "../../engine/engine.js";
import type { GenerateRequest, SamplingParams } from "../../engine/engine-api.js";
import { LlamaModelRunner } from "../../engine/runners/llama-model-runner.js";
import { generateLlamaGguf } from "../../gguf/llama-model.js";

const SEQUENCES = 8;
const CELLS_PER_SEQUENCE = 8192;

const SAMPLING: SamplingParams = {
  temperature: 0,
  topP: 1,
  topK: 0,
  minP: 0,
  seed: null,
  maxTokens: 4,
  stop: [],
  grammar: null,
  ignoreEos: true,
};

async function modelFile(window: number): Promise<string> {
  const path = join(tmpdir(), `continuum-shared-prefix-gemma3-w${window}.gguf`);
  if (!existsSync(path)) {
    await generateLlamaGguf(path, {
      arch: "gemma3",
      seed: 7,
      contextLength: CELLS_PER_SEQUENCE,
      embeddingLength: 256,
      blockCount: 8,
      feedForwardLength: 512,
      headCount: 4,
      headCountKv: 1,
      vocabSize: 4096,
      slidingWindow: window,
      weightType: "f32",
    });
  }
  return path;
}

/** The programs one after another on a fresh engine in `layout`: token counts and wall seconds. */
async function serve(
  modelPath: string,
  layout: "unified" | "streams",
  prompts: readonly string[],
  threads: number,
) {
  const runner = await LlamaModelRunner.open({
    modelPath,
    // the same cells per sequence in both layouts
    kvCells: SEQUENCES * CELLS_PER_SEQUENCE,
    kvLayout: layout,
    maxSeqs: SEQUENCES,
    batchTokens: 512,
    threads,
  });
  const engine = new Engine({ runner, policy: "vllm", maxNumSeqs: 4, maxNumBatchedTokens: 512 });
  try {
    let promptTokens = 0;
    let cachedTokens = 0;
    const t0 = performance.now();
    for (const [i, prompt] of prompts.entries()) {
      const request: GenerateRequest = {
        requestId: `program-${i}`,
        programId: null,
        isLastStep: false,
        toolHint: null,
        prompt,
        sampling: SAMPLING,
      };
      for await (const event of engine.generate(request, new AbortController().signal)) {
        if (event.type !== "done") continue;
        promptTokens += event.usage.promptTokens;
        cachedTokens += event.usage.cachedTokens;
      }
    }
    const wallS = (performance.now() - t0) / 1000;
    const stats = engine.kvStats();
    return {
      promptTokens,
      cachedTokens,
      kept: stats.checkpointTokens,
      wallS,
    };
  } finally {
    await engine.shutdown();
  }
}

const { values } = parseArgs({
  options: {
    programs: { type: "string", default: "8" },
    "prefix-words": { type: "string", default: "1400" },
    window: { type: "string", default: "128" },
    threads: { type: "string", default: "2" },
  },
});
const programs = Number(values.programs);
const window = Number(values.window);
const instructions = Array.from(
  { length: Number(values["prefix-words"]) },
  (_, i) => `w${(i * 7919) % 1000}`,
);
const prompts = Array.from(
  { length: programs },
  (_, i) => `${instructions.join(" ")} task number ${i} of ${programs}: fix the bug`,
);
const modelPath = await modelFile(window);
const rows: string[][] = [];
const results: Record<string, Awaited<ReturnType<typeof serve>>> = {};
for (const layout of ["unified", "streams"] as const) {
  const r = await serve(modelPath, layout, prompts, Number(values.threads));
  results[layout] = r;
  rows.push([
    layout,
    String(r.promptTokens),
    String(r.cachedTokens),
    String(r.promptTokens - r.cachedTokens),
    String(r.kept),
    r.wallS.toFixed(2),
  ]);
}
console.log(
  `${programs} programs opening with the same ${instructions.length} words, one after another; gemma3-arch, window ${window}`,
);
console.log(
  formatTextTable(["layout", "prompt tokens", "cached", "computed", "checkpointed", "wall s"], rows),
);
const ratio = (results.unified?.wallS ?? 0) / (results.streams?.wallS ?? 1);
console.log(`unified / streams wall time: ${ratio.toFixed(2)}x`);
