import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { weightPlacement } from "./llama-native.js";

describe("where a model's weights go", () => {
  test("with every layer on a GPU, the token embeddings go there too", () => {
    assert.deepEqual(weightPlacement({}, true), { gpuLayers: -1, embeddingsOnGpu: true });
    assert.deepEqual(weightPlacement({ gpuLayers: "all" }, true), { gpuLayers: -1, embeddingsOnGpu: true });
  });

  test("with some layers on the CPU, or no GPU, they stay where llama.cpp puts them (the CPU)", () => {
    assert.deepEqual(weightPlacement({ gpuLayers: 20 }, true), { gpuLayers: 20, embeddingsOnGpu: false });
    assert.deepEqual(weightPlacement({}, false), { gpuLayers: 0, embeddingsOnGpu: false });
  });

  test("an explicit choice wins", () => {
    assert.deepEqual(weightPlacement({ gpuLayers: "all", embeddingsOnGpu: false }, true), {
      gpuLayers: -1,
      embeddingsOnGpu: false,
    });
  });
});
