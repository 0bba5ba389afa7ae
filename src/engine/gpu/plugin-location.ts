import { join } from "node:path";

/** GPU backends `continuum build-gpu` can build a ggml plugin for. */
export type GpuBackend = "cuda" | "vulkan";

export const GPU_BACKENDS: readonly GpuBackend[] = ["cuda", "vulkan"];

/** Folder of the GPU plugins built here: <project root>/.cache/gpu-plugin/<backend>/. */
export function builtPluginDir(projectRoot: string, backend: GpuBackend): string {
  return join(projectRoot, ".cache", "gpu-plugin", backend);
}

/** The plugin file `continuum build-gpu` writes (libggml-cuda.so, libggml-vulkan.so). */
export function builtPluginFile(projectRoot: string, backend: GpuBackend): string {
  return join(builtPluginDir(projectRoot, backend), `libggml-${backend}.so`);
}

/** The stamp beside it: what the plugin was built from (commit, flags, toolkit), JSON. */
export function builtPluginStampFile(projectRoot: string, backend: GpuBackend): string {
  return join(builtPluginDir(projectRoot, backend), "stamp.json");
}
