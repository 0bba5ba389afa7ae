/**
 * Checks a GPU backend plugin with one real step of the model in a child process (gpu-probe-child.ts)
 * before the server loads it: a plugin that aborts inside ggml (PTX the driver cannot JIT, a missing
 * runtime, no memory) takes only the child down.
 */
import { spawn } from "node:child_process";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import type { KvCacheType } from "../native/llama-native.js";
import type { DeviceInfo } from "./device-info.js";
import { classifyProbeFailure, type ProbeFailure } from "./probe-failure.js";

export interface GpuProbeRequest {
  /** The plugin file to check; null runs the step on the CPU backends alone. */
  readonly plugin: string | null;
  readonly modelPath: string;
  readonly gpuLayers: number | "all" | "auto";
  readonly flashAttn?: boolean;
  readonly kvCacheType?: KvCacheType;
}

/** Passed: where the model ran its step (backend, GPU, memory, layers). Failed: why, in a few words. */
export type GpuProbeResult =
  | { readonly ok: true; readonly device: DeviceInfo }
  | ({ readonly ok: false } & ProbeFailure);

const DEFAULT_TIMEOUT_S = 300;
const STDERR_TAIL_CHARS = 16 * 1024;

/** The probe's bound: loading a large model can take minutes (CONTINUUM_GPU_PROBE_TIMEOUT_S overrides). */
export function probeTimeoutS(env = process.env): number {
  const value = Number(env["CONTINUUM_GPU_PROBE_TIMEOUT_S"]);
  return Number.isFinite(value) && value > 0 ? value : DEFAULT_TIMEOUT_S;
}

/** node's arguments for the child: under tsx (sources run as .ts) the child needs tsx too. */
function childArgs(): string[] {
  const self = fileURLToPath(import.meta.url);
  const entry = fileURLToPath(new URL(`./gpu-probe-child${extname(self)}`, import.meta.url));
  return extname(self) === ".ts" ? ["--import", import.meta.resolve("tsx"), entry] : [entry];
}

function deviceIn(stdout: string): DeviceInfo | null {
  const line = stdout.split("\n").find((l) => l.startsWith("{"));
  return line ? (JSON.parse(line) as DeviceInfo) : null;
}

export async function probeGpuBackend(
  request: GpuProbeRequest,
  timeoutS = probeTimeoutS(),
): Promise<GpuProbeResult> {
  const child = spawn(process.execPath, [...childArgs(), JSON.stringify(request)], {
    stdio: ["ignore", "pipe", "pipe"],
    // ggml's error lines are what classifyProbeFailure reads
    env: { ...process.env, CONTINUUM_LLAMA_LOG: "warn" },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (data: string) => {
    stdout += data;
  });
  child.stderr.setEncoding("utf8").on("data", (data: string) => {
    stderr = (stderr + data).slice(-STDERR_TAIL_CHARS);
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    // a GPU runtime stuck in its init may not answer SIGTERM
    child.kill("SIGKILL");
  }, timeoutS * 1000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (c: number | null, s: NodeJS.Signals | null) => resolve([c, s]));
  }).finally(() => clearTimeout(timer));
  // the step ran: a crash while tearing the GPU runtime down afterwards does not matter to the server
  const device = deviceIn(stdout);
  if (device) return { ok: true, device };
  const exit = { code, signal, stderr, timedOutS: timedOut ? timeoutS : null };
  return { ok: false, ...classifyProbeFailure(exit, request.plugin) };
}
