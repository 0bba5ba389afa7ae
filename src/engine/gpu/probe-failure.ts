/**
 * Why a GPU probe child failed, in a few words, from how it ended and the tail of its stderr: ggml's own
 * error lines, and the stage and error lines the child writes (PROBE_MARK).
 */

/** Prefix of the lines the probe child writes on stderr: `<mark> stage <what>`, `<mark> error: <why>`. */
export const PROBE_MARK = "continuum-gpu-probe:";

export type ProbeFailureKind = "timeout" | "plugin-load" | "no-device" | "out-of-memory" | "crash" | "error";

export interface ProbeFailure {
  readonly kind: ProbeFailureKind;
  /** e.g. "aborted while decoding (CUDA error: the provided PTX was compiled with an unsupported toolchain)" */
  readonly cause: string;
}

/** How the probe child ended. */
export interface ProbeExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
  /** The timeout it was killed at, null when it ended by itself. */
  readonly timedOutS: number | null;
}

const OUT_OF_MEMORY = /out of memory|cudaMalloc failed|ErrorOutOfDeviceMemory/i;
/** ggml's load_backend lines: dlopen failed, or the plugin found nothing to drive. */
const PLUGIN_NOT_LOADED =
  /load_backend: failed to (?:load|initialize backend)|ggml_backend_init returned NULL/;
const GPU_ERROR = /(?:CUDA error: |Vulkan error|GGML_ASSERT\().*/;

function deathBy(signal: NodeJS.Signals | null): string | null {
  if (signal === null) return null;
  if (signal === "SIGABRT") return "aborted";
  if (signal === "SIGSEGV") return "crashed (segmentation fault)";
  return `killed by ${signal}`;
}

/** ggml's "failed to load <file>: <file>: <dlerror>" without the file names. */
function pluginLoadDetail(line: string, pluginFile: string | null): string {
  const afterFile = pluginFile === null ? -1 : line.lastIndexOf(`${pluginFile}: `);
  if (afterFile >= 0) return line.slice(afterFile + (pluginFile?.length ?? 0) + 2);
  return line.replace(/^.*?(failed to load |failed to initialize backend from )/, "");
}

export function classifyProbeFailure(exit: ProbeExit, pluginFile: string | null): ProbeFailure {
  const lines = exit.stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const stage = lines.findLast((line) => line.startsWith(`${PROBE_MARK} stage `));
  const during = stage ? ` while ${stage.slice(`${PROBE_MARK} stage `.length)}` : "";
  if (exit.timedOutS !== null)
    return { kind: "timeout", cause: `no answer within ${exit.timedOutS} s${during}` };

  const ownError = lines.findLast((line) => line.startsWith(`${PROBE_MARK} error: `));
  const ownReason = ownError?.slice(`${PROBE_MARK} error: `.length);
  const outOfMemory = lines.find((line) => OUT_OF_MEMORY.test(line));
  const notLoaded = lines.find((line) => PLUGIN_NOT_LOADED.test(line));
  const gpuError = lines.map((line) => GPU_ERROR.exec(line)?.[0]).find((match) => match !== undefined);
  const death = deathBy(exit.signal);
  const described = (what: string, detail: string | undefined): string =>
    `${what}${during}${detail ? ` (${detail})` : ""}`;

  if (outOfMemory) {
    return { kind: "out-of-memory", cause: described(death ?? "out of GPU memory", gpuError ?? outOfMemory) };
  }
  if (notLoaded) {
    return {
      kind: "plugin-load",
      cause: `the plugin did not load (${pluginLoadDetail(notLoaded, pluginFile)})`,
    };
  }
  if (ownReason?.startsWith("no GPU device")) return { kind: "no-device", cause: ownReason };
  if (death) return { kind: "crash", cause: described(death, gpuError) };
  return { kind: "error", cause: described(`exited with code ${exit.code}`, gpuError ?? ownReason) };
}
