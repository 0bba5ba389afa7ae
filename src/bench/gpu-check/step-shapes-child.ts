/**
 * The GPU check's step measurement, in a process of its own (a GPU fault ends it, not the check; its GPU
 * memory is free again when it exits): loads a model with every layer on the GPU and times single steps at
 * the shapes of a reference file. Usage: node step-shapes-child.js <model.gguf> <reference.jsonl> <out.json>
 */
import { readFile, writeFile } from "node:fs/promises";
import { devices, loadModel } from "../../engine/native/llama-native.js";
import { measureStepShapes, parseReferenceSteps } from "../../engine/profile/step-shapes.js";

/** GPU memory left free for llama.cpp's compute buffers and the CUDA context. */
const HEADROOM_BYTES = 8 * 2 ** 30;
/** Never more KV than this, whatever the GPU holds: enough for every reference shape up to 256 x 1024. */
const MAX_CELLS = 300_000;

const [modelPath, referencePath, outPath] = process.argv.slice(2);
if (!modelPath || !referencePath || !outPath) {
  process.stderr.write("usage: step-shapes-child <model.gguf> <reference.jsonl> <out.json>\n");
  process.exit(2);
}
const reference = parseReferenceSteps(await readFile(referencePath, "utf8"));
const model = await loadModel(modelPath, { gpuLayers: "all" });
const gpu = devices().find((d) => d.type === "gpu" || d.type === "igpu");
const kvBytesPerToken = model.info.kvBytesPerTokenF16 ?? 0;
const freeBytes = gpu ? gpu.memoryFree - HEADROOM_BYTES : 2 ** 30;
const maxKvCells = Math.max(4096, Math.min(MAX_CELLS, Math.floor(freeBytes / Math.max(1, kvBytesPerToken))));
process.stderr.write(
  `step shapes on ${gpu?.description ?? "the CPU"}: ${reference.length} shapes, at most ${maxKvCells} KV cells\n`,
);
const started = performance.now();
const result = await measureStepShapes(
  model,
  reference.map((r) => r.shape),
  { maxKvCells, ubatchTokens: 2048, repeats: 5, log: (line) => process.stderr.write(`  ${line}\n`) },
);
await writeFile(
  outPath,
  JSON.stringify(
    {
      device: gpu?.description ?? "cpu",
      maxKvCells,
      seconds: (performance.now() - started) / 1000,
      ...result,
    },
    null,
    1,
  ),
);
model.free();
