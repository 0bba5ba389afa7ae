import { type GgufLayout, generateLlamaGguf, type LlamaSpec } from "../../gguf/index.js";

/** The smallest model llama.cpp loads and runs: for tests of what a GGUF carries, not of what it computes. */
export const TINY_GGUF_SPEC: LlamaSpec = {
  contextLength: 256,
  embeddingLength: 32,
  blockCount: 1,
  feedForwardLength: 64,
  headCount: 2,
  headCountKv: 1,
  seed: 7,
  weightType: "f32",
};

/**
 * A tiny generated GGUF whose metadata carries `chatTemplate` (and `extraMetadata`, e.g. a `tool_use`
 * template): what tests need to see a real model's template come through llama.cpp's loader.
 */
export function writeTemplateGguf(
  path: string,
  chatTemplate: string,
  extraMetadata: Record<string, string> = {},
): Promise<GgufLayout> {
  return generateLlamaGguf(path, { ...TINY_GGUF_SPEC, chatTemplate, extraMetadata });
}
