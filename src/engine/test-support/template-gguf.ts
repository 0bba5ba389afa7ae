import { type GgufLayout, generateLlamaGguf } from "../gguf/index.js";

/**
 * A tiny generated GGUF whose metadata carries `chatTemplate` (and `extraMetadata`, e.g. a `tool_use`
 * template): what tests need to see a real model's template come through llama.cpp's loader.
 */
export function writeTemplateGguf(
  path: string,
  chatTemplate: string,
  extraMetadata: Record<string, string> = {},
): Promise<GgufLayout> {
  return generateLlamaGguf(path, {
    contextLength: 256,
    embeddingLength: 32,
    blockCount: 1,
    feedForwardLength: 64,
    headCount: 2,
    headCountKv: 1,
    seed: 7,
    weightType: "f32",
    chatTemplate,
    extraMetadata,
  });
}
