import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * ggml's CPU backend compiled for this machine by `continuum build-cpu` (-march=native), loaded in place
 * of the prebuilt variant that matches the CPU best. The prebuilt variants are compiled for a family of
 * CPUs by another compiler; llama.cpp's own tools are usually built natively, and the kernels then differ.
 */
export const NATIVE_CPU_VARIANT = "native";

/** CONTINUUM_GGML_CPU's word for ggml's pick among the prebuilt variants, a native build there or not. */
export const PREBUILT_CPU_VARIANTS = "prebuilt";

/** <project root>/.cache/cpu-backend/ */
export function builtCpuBackendDir(projectRoot: string): string {
  return join(projectRoot, ".cache", "cpu-backend");
}

/** The library, named as ggml's loader names a variant (libggml-cpu-<variant>.so). */
export function builtCpuBackendFile(projectRoot: string): string {
  return join(builtCpuBackendDir(projectRoot), `libggml-cpu-${NATIVE_CPU_VARIANT}.so`);
}

export function builtCpuBackendStampFile(projectRoot: string): string {
  return join(builtCpuBackendDir(projectRoot), "stamp.json");
}

/** stamp.json beside the built backend: what it was built from and for. */
export interface CpuBackendStamp {
  /** The llama.cpp commit of the source tree. */
  commit: string;
  llamaCppTag: string;
  nodeLlamaCppVersion: string;
  cmakeFlags: string[];
  /** The compiler's `--version` first line. */
  compiler: string;
  /** cpuIdentity() of the machine it was built on: code for one CPU may not run on another. */
  cpu: string;
  /** SHA-256 of the prebuilt libggml-base.so it binds to: another ggml-base may not match its ABI. */
  ggmlBase: string;
  buildSeconds: number;
  builtAt: string;
}

/** Model name and feature flags of this machine's CPU, hashed; "" where /proc/cpuinfo cannot be read. */
export function cpuIdentity(cpuinfo = readCpuinfo()): string {
  const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, "m").exec(cpuinfo)?.[1]?.trim() ?? "";
  const model = field("model name");
  const flags = field("flags").split(/\s+/).filter(Boolean).sort().join(" ");
  if (model === "" && flags === "") return "";
  return createHash("sha256").update(`${model}\n${flags}`).digest("hex").slice(0, 16);
}

function readCpuinfo(): string {
  try {
    return readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    return "";
  }
}

export function fileSha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** The libggml-base.so this process has mapped (the engine's, after its addon loaded); undefined if none. */
export function loadedGgmlBase(maps = readProcMaps()): string | undefined {
  for (const line of maps.split("\n")) {
    const path = line.slice(line.indexOf("/"));
    if (line.includes("/") && /\/libggml-base\.so$/.test(path)) return path;
  }
  return undefined;
}

function readProcMaps(): string {
  try {
    return readFileSync("/proc/self/maps", "utf8");
  } catch {
    return "";
  }
}

export function readCpuBackendStamp(path: string): CpuBackendStamp | undefined {
  if (!existsSync(path)) return undefined;
  try {
    const stamp = JSON.parse(readFileSync(path, "utf8")) as Partial<CpuBackendStamp>;
    if (typeof stamp.cpu !== "string" || typeof stamp.ggmlBase !== "string") return undefined;
    return stamp as CpuBackendStamp;
  } catch {
    return undefined;
  }
}

/** What a built backend would be loaded against: this CPU and the engine's ggml-base. */
export interface CpuBackendHost {
  cpu: string;
  /** SHA-256 of the engine's libggml-base.so */
  ggmlBase: string;
}

/** This process's host: its CPU, and the engine's libggml-base.so once the addon mapped it ("" before). */
export function cpuBackendHost(): CpuBackendHost {
  const base = loadedGgmlBase();
  return { cpu: cpuIdentity(), ggmlBase: base ? fileSha256(base) : "" };
}

/** Why the built backend must not be loaded here, or undefined when it may. */
export function builtCpuBackendProblem(
  file: string,
  stamp: CpuBackendStamp | undefined,
  host: CpuBackendHost,
): string | undefined {
  if (!existsSync(file)) return `${file} is not built (continuum build-cpu builds it)`;
  if (!stamp) return `${file} has no readable stamp.json beside it (continuum build-cpu --force rebuilds it)`;
  if (host.cpu === "" || stamp.cpu !== host.cpu) {
    return `${file} was built on another CPU than this one (continuum build-cpu rebuilds it here)`;
  }
  if (stamp.ggmlBase !== host.ggmlBase) {
    return `${file} was built for another llama.cpp release than the installed one (continuum build-cpu rebuilds it)`;
  }
  return undefined;
}
