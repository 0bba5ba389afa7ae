import { Gauge, type Registry } from "prom-client";
import type { EngineMemory } from "../../engine/engine-api.js";

/** How the process's memory splits, by owner: what the engine holds, the JS heap, and the rest. */
export function memoryByOwner(engine: EngineMemory, rssBytes: number, heapUsedBytes: number) {
  const owned = {
    model: engine.modelBytes,
    kv_pool: engine.kvPoolBytes,
    ram_tier: engine.ramTierBytes,
    state_buffers: engine.stateBufferBytes,
    js_heap: heapUsedBytes,
  };
  const accounted = Object.values(owned).reduce((sum, bytes) => sum + bytes, 0);
  // a model's weights are mapped from its file: pages not yet touched are not resident, so this can be < 0
  return { ...owned, other: Math.max(0, rssBytes - accounted) };
}

/**
 * `continuum:memory_bytes{owner}`: the resident memory of the server by owner (model weights and the KV pool
 * when in RAM, the RAM tier, reusable state buffers, the JS heap with the program table, the rest), and
 * `continuum:resident_memory_bytes`, the RSS they add up to; `continuum:programs`, the program table's size.
 */
export function registerMemoryMetrics(registers: Registry[], read: () => EngineMemory): void {
  new Gauge({
    name: "continuum:memory_bytes",
    help: "Resident memory by owner: model, kv_pool (in RAM), ram_tier, state_buffers, js_heap, other.",
    labelNames: ["owner"],
    registers,
    collect() {
      const usage = process.memoryUsage();
      for (const [owner, bytes] of Object.entries(memoryByOwner(read(), usage.rss, usage.heapUsed))) {
        this.set({ owner }, bytes);
      }
    },
  });
  new Gauge({
    name: "continuum:resident_memory_bytes",
    help: "Resident set size of the server process.",
    registers,
    collect() {
      this.set(process.memoryUsage().rss);
    },
  });
  new Gauge({
    name: "continuum:programs",
    help: "Programs in the scheduler's table (in flight, pinned, or idle and not yet forgotten).",
    registers,
    collect() {
      this.set(read().programs);
    },
  });
}
