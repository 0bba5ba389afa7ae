/**
 * Which ggml GPU backend plugin the engine loads: `CONTINUUM_GPU_PLUGIN` names exactly one; else a plugin
 * `continuum build-gpu` built here beats one from an installed @node-llama-cpp GPU package; CUDA before
 * Vulkan. One plugin at most: two backends driving the same GPU would split its layers between them.
 */
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, resolve } from "node:path";
import { builtPluginFile, GPU_BACKENDS, type GpuBackend } from "./plugin-location.js";

/** Where a chosen plugin came from. */
export type GpuPluginSource = "env" | "built" | "packaged";

export interface GpuPlugin {
  readonly file: string;
  /** The backend its file name says (libggml-cuda*.so, libggml-vulkan*.so); null for any other name. */
  readonly backend: GpuBackend | null;
  readonly source: GpuPluginSource;
}

/** The plugin files present, as chooseGpuPlugin weighs them. */
export interface GpuPluginCandidates {
  /** CONTINUUM_LLAMA_GPU=0: no GPU plugin at all. */
  readonly disabled: boolean;
  /** CONTINUUM_GPU_PLUGIN: exactly this file. */
  readonly override: string | null;
  /** Plugins `continuum build-gpu` wrote here that exist. */
  readonly built: readonly string[];
  /** Plugins of installed @node-llama-cpp GPU packages. */
  readonly packaged: readonly string[];
}

function backendOfPlugin(file: string): GpuBackend | null {
  const backend = /^libggml-([a-z]+)/.exec(basename(file))?.[1];
  return GPU_BACKENDS.find((b) => b === backend) ?? null;
}

function byBackendOrder(files: readonly string[]): string | undefined {
  for (const backend of GPU_BACKENDS) {
    const file = files.find((f) => backendOfPlugin(f) === backend);
    if (file) return file;
  }
  return files[0];
}

export function chooseGpuPlugin(candidates: GpuPluginCandidates): GpuPlugin | null {
  if (candidates.disabled) return null;
  const pick = (file: string, source: GpuPluginSource): GpuPlugin => ({
    file,
    backend: backendOfPlugin(file),
    source,
  });
  if (candidates.override !== null) return pick(candidates.override, "env");
  const built = byBackendOrder(candidates.built);
  if (built) return pick(built, "built");
  const packaged = byBackendOrder(candidates.packaged);
  return packaged ? pick(packaged, "packaged") : null;
}

const GPU_PACKAGES = [
  "@node-llama-cpp/linux-x64-cuda",
  "@node-llama-cpp/linux-x64-cuda-ext",
  "@node-llama-cpp/linux-x64-vulkan",
] as const;

const require = createRequire(import.meta.url);

/** GPU backend plugins (libggml-cuda*.so, libggml-vulkan*.so) in installed optional GPU packages. */
function findPackagedGpuPlugins(): string[] {
  const found: string[] = [];
  for (const pkg of GPU_PACKAGES) {
    let pkgDir: string;
    try {
      pkgDir = resolve(dirname(require.resolve(pkg)), "..");
    } catch {
      continue;
    }
    const bins = join(pkgDir, "bins");
    if (!existsSync(bins)) continue;
    for (const sub of readdirSync(bins, { withFileTypes: true })) {
      if (!sub.isDirectory()) continue;
      for (const f of readdirSync(join(bins, sub.name))) {
        if (/^libggml-(cuda|vulkan)[^/]*\.so$/.test(f)) found.push(join(bins, sub.name, f));
      }
    }
  }
  return found;
}

/** The candidates on this machine: the environment, the plugins built under projectRoot, the packages. */
export function gpuPluginCandidates(projectRoot: string, env = process.env): GpuPluginCandidates {
  const override = env["CONTINUUM_GPU_PLUGIN"];
  return {
    disabled: env["CONTINUUM_LLAMA_GPU"] === "0",
    override: override ? resolve(override) : null,
    built: GPU_BACKENDS.map((b) => builtPluginFile(projectRoot, b)).filter((f) => existsSync(f)),
    packaged: findPackagedGpuPlugins(),
  };
}

/** The plugin the engine loads on this machine, or null (CPU only). */
export function findGpuPlugin(projectRoot: string, env = process.env): GpuPlugin | null {
  return chooseGpuPlugin(gpuPluginCandidates(projectRoot, env));
}
