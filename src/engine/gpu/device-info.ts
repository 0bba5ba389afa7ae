/**
 * Where a model runs: the backend and device that hold its layers, how many layers are there, and where
 * its KV cache lives. Computed from what llama.cpp loaded (its devices, the model's layer count, the
 * gpu-layers value the model was loaded with), for the start-up banner, /metrics, the dashboard and profiles.
 */
import { cpus, totalmem } from "node:os";
import { GIB } from "../../core/kv/offload-tiers.js";
import type { DeviceInfo as GgmlDevice } from "../native/llama-native.js";

/** Where the KV cache lives: on the GPU, in RAM, or split (the layers on each keep their own KV there). */
export type KvCachePlace = "gpu" | "cpu" | "split";

export interface DeviceInfo {
  /** "cpu", or the GPU's ggml backend lower-cased ("cuda", "vulkan", ...) */
  readonly backend: string;
  /** the GPU's name (e.g. "NVIDIA H100 80GB HBM3"), or the CPU's model name */
  readonly device: string;
  /** the GPU's total memory, or the machine's RAM */
  readonly memoryBytes: number;
  /** repeating layers on the GPU, of layersTotal */
  readonly layersOffloaded: number;
  readonly layersTotal: number;
  readonly kvCache: KvCachePlace;
}

/** A model on the CPU: the CPU device ggml lists, else the host as Node sees it (fake runners). */
export function cpuDeviceInfo(layersTotal = 0, cpu?: GgmlDevice): DeviceInfo {
  return {
    backend: "cpu",
    device: cpu?.description ?? cpus()[0]?.model.trim() ?? "unknown CPU",
    memoryBytes: cpu?.memoryTotal ?? totalmem(),
    layersOffloaded: 0,
    layersTotal,
    kvCache: "cpu",
  };
}

/**
 * The devices llama.cpp offloads layers to: every GPU, else the integrated ones. It skips a GPU that an
 * earlier backend already lists (CUDA and Vulkan both see an NVIDIA card); our device list carries no
 * device id, so a card of the same name under another backend counts as that one.
 */
function offloadDevices(devices: readonly GgmlDevice[]): GgmlDevice[] {
  const gpus: GgmlDevice[] = [];
  for (const d of devices) {
    if (d.type !== "gpu") continue;
    if (!gpus.some((g) => g.backend !== d.backend && g.description === d.description)) gpus.push(d);
  }
  return gpus.length > 0 ? gpus : devices.filter((d) => d.type === "igpu");
}

/**
 * `gpuLayers` as llama.cpp got it (negative: all). llama.cpp counts layersTotal + 1 slots, the output
 * layer being the last, and offloads the top `gpuLayers` of them: `gpuLayers` = layersTotal still leaves
 * the first repeating layer on the CPU.
 */
export function deviceInfoOf(
  devices: readonly GgmlDevice[],
  layersTotal: number,
  gpuLayers: number,
): DeviceInfo {
  const gpus = offloadDevices(devices);
  const slots = gpuLayers < 0 ? layersTotal + 1 : Math.min(gpuLayers, layersTotal + 1);
  if (gpus.length === 0 || slots === 0) {
    return cpuDeviceInfo(
      layersTotal,
      devices.find((d) => d.type === "cpu"),
    );
  }
  const layersOffloaded = slots - 1;
  return {
    backend: [...new Set(gpus.map((d) => d.backend.toLowerCase()))].join("+"),
    device: gpus.map((d) => d.description).join(" + "),
    memoryBytes: gpus.reduce((sum, d) => sum + d.memoryTotal, 0),
    layersOffloaded,
    layersTotal,
    kvCache: layersOffloaded === layersTotal ? "gpu" : layersOffloaded === 0 ? "cpu" : "split",
  };
}

const KV_CACHE_TEXT: Record<KvCachePlace, string> = {
  gpu: "KV cache on the GPU",
  cpu: "KV cache in RAM",
  split: "KV cache split between the GPU and RAM",
};

/** One line, e.g. "cuda · NVIDIA H100 80GB HBM3 · 79.6 GiB · 32/32 layers on the GPU · KV cache on the GPU". */
export function describeDevice(info: DeviceInfo): string {
  const memory = `${(info.memoryBytes / GIB).toFixed(1)} GiB`;
  const parts =
    info.backend === "cpu"
      ? [info.backend, info.device, `${memory} RAM`]
      : [info.backend, info.device, memory, `${info.layersOffloaded}/${info.layersTotal} layers on the GPU`];
  return [...parts, KV_CACHE_TEXT[info.kvCache]].join(" · ");
}
