/**
 * Decides, before this process loads any GPU plugin, whether it serves on the GPU: the chosen plugin must
 * first pass probeGpuBackend in a child. With --gpu-layers auto a failed check is one line on stderr and
 * serving goes on on the CPU; an explicit --gpu-layers N|all stops instead (gpu.md: an explicit GPU request
 * never falls back silently). Then loads this process's backends accordingly.
 */
import { findProjectRoot, type KvCacheType, loadBackends } from "../native/llama-native.js";
import {
  type GpuProbeRequest,
  type GpuProbeResult,
  probeGpuBackend,
  probeTimeoutS,
} from "./backend-probe.js";
import {
  chooseGpuPlugin,
  type GpuPlugin,
  type GpuPluginCandidates,
  gpuPluginCandidates,
} from "./plugin-discovery.js";
import type { ProbeFailure } from "./probe-failure.js";

export type GpuLayers = number | "all" | "auto";

/** What was chosen and how its check went (for the banner, /metrics and the dashboard). */
export interface GpuBackendCheck {
  /** The plugin chosen on this machine; null: none found, or CONTINUUM_LLAMA_GPU=0. */
  readonly plugin: GpuPlugin | null;
  /** The probe's outcome; null when none ran (no plugin, or --gpu-layers 0). */
  readonly probe: GpuProbeResult | null;
  /** Whether this process loaded the plugin: false means it runs on the CPU. */
  readonly onGpu: boolean;
}

export interface GpuCheckOptions {
  readonly modelPath: string;
  readonly gpuLayers: GpuLayers;
  readonly flashAttn?: boolean;
  readonly kvCacheType?: KvCacheType;
  /** Where the line about a failed check goes when serving goes on on the CPU (default stderr). */
  readonly warn?: (line: string) => void;
}

export type GpuProbe = (request: GpuProbeRequest) => Promise<GpuProbeResult>;

function noGpuBackendMessage(gpuLayers: GpuLayers, disabled: boolean): string {
  const asked = `no GPU backend: --gpu-layers ${gpuLayers} asks for a GPU, but`;
  if (disabled)
    return `${asked} CONTINUUM_LLAMA_GPU=0 turns GPU backends off; unset it, or pass --gpu-layers auto`;
  return (
    `${asked} no GPU plugin was built here or installed; run \`continuum build-gpu\` or install ` +
    "@node-llama-cpp/linux-x64-cuda (or -vulkan), or pass --gpu-layers auto to serve on the CPU"
  );
}

function fixFor(failure: ProbeFailure, plugin: GpuPlugin, timeoutS: number): string {
  if (failure.kind === "timeout") {
    return `raise CONTINUUM_GPU_PROBE_TIMEOUT_S (now ${timeoutS} s) if loading the model takes longer`;
  }
  if (failure.kind === "out-of-memory")
    return "offload fewer layers (--gpu-layers <n>) or use a smaller model";
  if (failure.kind === "no-device") return "check that the GPU driver sees the GPU (nvidia-smi, vulkaninfo)";
  if (plugin.source === "env") {
    return "point CONTINUUM_GPU_PLUGIN at a plugin built for this GPU (`continuum build-gpu` builds one), or unset it";
  }
  return "run `continuum build-gpu` to build the plugin for this GPU";
}

function failedCheckLine(plugin: GpuPlugin, failure: ProbeFailure, onCpu: boolean, timeoutS: number): string {
  const backend = `GPU backend ${plugin.backend ?? "plugin"} (${plugin.file})`;
  const outcome = onCpu ? "; serving on the CPU" : "";
  return `${backend} failed its check: ${failure.cause}${outcome}. Fix: ${fixFor(failure, plugin, timeoutS)}.`;
}

/** The decision alone: which plugin, whether it is probed, and what a failed probe means. */
export async function checkGpuBackend(
  candidates: GpuPluginCandidates,
  options: GpuCheckOptions,
  probe: GpuProbe,
  timeoutS: number,
): Promise<GpuBackendCheck> {
  const plugin = chooseGpuPlugin(candidates);
  if (options.gpuLayers === 0) return { plugin, probe: null, onGpu: false };
  const explicit = options.gpuLayers !== "auto";
  if (plugin === null) {
    if (explicit) throw new Error(noGpuBackendMessage(options.gpuLayers, candidates.disabled));
    return { plugin, probe: null, onGpu: false };
  }
  const result = await probe({
    plugin: plugin.file,
    modelPath: options.modelPath,
    gpuLayers: options.gpuLayers,
    ...(options.flashAttn === undefined ? {} : { flashAttn: options.flashAttn }),
    ...(options.kvCacheType ? { kvCacheType: options.kvCacheType } : {}),
  });
  if (result.ok) return { plugin, probe: result, onGpu: true };
  const line = failedCheckLine(plugin, result, !explicit, timeoutS);
  if (explicit) throw new Error(line);
  (options.warn ?? ((l: string) => process.stderr.write(`${l}\n`)))(`continuum: ${line}`);
  return { plugin, probe: result, onGpu: false };
}

let lastCheck: GpuBackendCheck | null = null;

/** The check setUpGpuBackend made in this process, or null before it ran. */
export function gpuBackendCheck(): GpuBackendCheck | null {
  return lastCheck;
}

/** Checks this machine's GPU plugin for the model, then loads the backends it passed (or the CPU's alone). */
export async function setUpGpuBackend(options: GpuCheckOptions): Promise<GpuBackendCheck> {
  const timeoutS = probeTimeoutS();
  const candidates = gpuPluginCandidates(findProjectRoot());
  const check = await checkGpuBackend(candidates, options, (r) => probeGpuBackend(r, timeoutS), timeoutS);
  loadBackends({ gpuPlugins: check.onGpu && check.plugin ? [check.plugin.file] : [] });
  lastCheck = check;
  return check;
}
