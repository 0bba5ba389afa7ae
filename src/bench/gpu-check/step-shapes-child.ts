/**
 * The GPU check's step measurement, in a process of its own (a GPU fault ends it, not the check; its GPU
 * memory is free again when it exits): loads a model with every layer on the GPU and times single steps at
 * the shapes of a reference file. Usage: node step-shapes-child.js <model.gguf> <reference.jsonl> <out.json>
 * [micro-batch rows, default 2048 as the engine uses on a GPU] [token embeddings: gpu (the default with every
 * layer on a GPU) or cpu (llama.cpp's own placement)]
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseReferenceSteps } from "../../core/profile/step-reference.js";
import { devices, loadModel } from "../../engine/native/llama-native.js";
import { measureStepShapes } from "../../profiler/step-shapes.js";

/** GPU memory left free for llama.cpp's compute buffers and the CUDA context. */
const HEADROOM_BYTES = 8 * 2 ** 30;
/** Never more KV than this, whatever the GPU holds: enough for 256 x 1024 and 192 x 1536 (256-cell streams). */
const MAX_CELLS = 360_000;

const [modelPath, referencePath, outPath, ubatchArg = "2048", embeddings = "gpu"] = process.argv.slice(2);
const ubatchTokens = Number(ubatchArg);
if (
  !modelPath ||
  !referencePath ||
  !outPath ||
  !Number.isInteger(ubatchTokens) ||
  ubatchTokens < 1 ||
  (embeddings !== "gpu" && embeddings !== "cpu")
) {
  process.stderr.write(
    "usage: step-shapes-child <model.gguf> <reference.jsonl> <out.json> [ubatch rows] [embeddings: gpu|cpu]\n",
  );
  process.exit(2);
}
const reference = parseReferenceSteps(await readFile(referencePath, "utf8"));
const model = await loadModel(modelPath, { gpuLayers: "all", embeddingsOnGpu: embeddings === "gpu" });
const gpu = devices().find((d) => d.type === "gpu" || d.type === "igpu");
const kvBytesPerToken = model.info.kvBytesPerTokenF16 ?? 0;
const freeBytes = gpu ? gpu.memoryFree - HEADROOM_BYTES : 2 ** 30;
const maxKvCells = Math.max(4096, Math.min(MAX_CELLS, Math.floor(freeBytes / Math.max(1, kvBytesPerToken))));
process.stderr.write(
  `step shapes on ${gpu?.description ?? "the CPU"}: ${reference.length} shapes, at most ${maxKvCells} KV cells, micro-batches of ${ubatchTokens}\n`,
);
const started = performance.now();
const result = await measureStepShapes(
  model,
  reference.map((r) => r.shape),
  { maxKvCells, ubatchTokens, repeats: 5, log: (line) => process.stderr.write(`  ${line}\n`) },
);
await writeFile(
  outPath,
  JSON.stringify(
    {
      device: gpu?.description ?? "cpu",
      maxKvCells,
      ubatchTokens,
      embeddings,
      seconds: (performance.now() - started) / 1000,
      ...result,
    },
    null,
    1,
  ),
);
model.free();
