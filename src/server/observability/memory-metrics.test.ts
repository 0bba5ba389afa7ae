import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Registry } from "prom-client";
import { memoryByOwner, registerMemoryMetrics } from "./memory-metrics.js";

const engineMemory = {
  modelBytes: 300e6,
  kvPoolBytes: 100e6,
  ramTierBytes: 2e9,
  stateBufferBytes: 50e6,
  programs: 12,
};

describe("memory by owner", () => {
  it("splits the RSS into the engine's owners, the JS heap and the rest, which add up to the RSS", () => {
    const split = memoryByOwner(engineMemory, 3e9, 200e6);
    assert.deepEqual(split, {
      model: 300e6,
      kv_pool: 100e6,
      ram_tier: 2e9,
      state_buffers: 50e6,
      js_heap: 200e6,
      other: 350e6,
    });
    assert.equal(
      Object.values(split).reduce((a, b) => a + b, 0),
      3e9,
    );
    // weights mapped but not yet resident: nothing is left for "other", never a negative owner
    assert.equal(memoryByOwner(engineMemory, 2e9, 200e6).other, 0);
  });

  it("is scraped as continuum:memory_bytes{owner}, with the RSS and the program table's size", async () => {
    const registry = new Registry();
    registerMemoryMetrics([registry], () => engineMemory);
    const text = await registry.metrics();
    for (const owner of ["model", "kv_pool", "ram_tier", "state_buffers", "js_heap", "other"])
      assert.match(text, new RegExp(`continuum:memory_bytes\\{owner="${owner}"\\} \\d`));
    assert.match(text, /continuum:memory_bytes\{owner="ram_tier"\} 2000000000/);
    assert.match(text, /continuum:resident_memory_bytes [1-9]\d*/);
    assert.match(text, /continuum:programs 12/);
  });
});
