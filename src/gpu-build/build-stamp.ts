import { existsSync, readFileSync } from "node:fs";
import type { GpuBackend } from "../engine/gpu/plugin-location.js";

/** What decides whether a built plugin is still the one this machine would build. */
export interface GpuBuildInputs {
  /** The llama.cpp commit of the source tree. */
  commit: string;
  cmakeFlags: readonly string[];
  /** `nvcc --version`'s release line, or `glslc --version`'s first line. */
  toolkit: string;
}

/** stamp.json beside a built plugin. */
export interface GpuBuildStamp extends GpuBuildInputs {
  backend: GpuBackend;
  llamaCppTag: string;
  nodeLlamaCppVersion: string;
  /** CUDA architectures ("90", "86;90"); null for Vulkan. */
  arch: string | null;
  buildSeconds: number;
  builtAt: string;
}

/** Why the plugin must be built again, or undefined when `stamp` already describes `inputs`. */
export function rebuildReason(stamp: GpuBuildStamp | undefined, inputs: GpuBuildInputs): string | undefined {
  if (!stamp) return "no plugin built yet";
  if (stamp.commit !== inputs.commit) {
    return `llama.cpp commit changed (${stamp.commit.slice(0, 12)} -> ${inputs.commit.slice(0, 12)})`;
  }
  if (stamp.toolkit !== inputs.toolkit) return `toolkit changed (${stamp.toolkit} -> ${inputs.toolkit})`;
  const before = stamp.cmakeFlags.join(" ");
  const now = inputs.cmakeFlags.join(" ");
  if (before !== now) return `cmake flags changed (${before} -> ${now})`;
  return undefined;
}

/** The stamp at `path`; undefined when missing or unreadable (both mean: build). */
export function readBuildStamp(path: string): GpuBuildStamp | undefined {
  if (!existsSync(path)) return undefined;
  try {
    const stamp = JSON.parse(readFileSync(path, "utf8")) as Partial<GpuBuildStamp>;
    if (typeof stamp.commit !== "string" || typeof stamp.toolkit !== "string") return undefined;
    if (!Array.isArray(stamp.cmakeFlags)) return undefined;
    return stamp as GpuBuildStamp;
  } catch {
    return undefined;
  }
}
