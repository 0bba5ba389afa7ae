import type { DeviceInfo } from "../gpu/device-info.js";

/** Where a Llama-3.1-8B lands on an H100 with every layer offloaded (as measured, docs/gpu.md). */
export const H100_ALL_LAYERS: DeviceInfo = {
  backend: "cuda",
  device: "NVIDIA H100 80GB HBM3",
  memoryBytes: 85_520_809_984,
  layersOffloaded: 32,
  layersTotal: 32,
  kvCache: "gpu",
};
