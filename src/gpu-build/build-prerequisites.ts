import { existsSync } from "node:fs";
import { join } from "node:path";
import type { GpuBackend } from "../engine/gpu/plugin-location.js";
import type { GpuBuildTarget } from "./build-plan.js";
import { archsFromComputeCaps } from "./cuda-arch.js";
import { driverCudaVersion, nvccReleaseLine, toolkitNewerThanDriver } from "./cuda-toolkit.js";
import { findExecutable, outputOf } from "./executables.js";

/** Every missing tool at once, one line each naming what to install. */
export class MissingPrerequisitesError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join("\n"));
  }
}

/** --arch: "auto" (the GPUs of this machine) or the architectures to build for. */
export type ArchRequest = "auto" | readonly string[];

export interface GpuToolchain {
  target: GpuBuildTarget;
  /** The toolkit's own version line (recorded in the stamp: a new toolkit means a rebuild). */
  toolkit: string;
  warnings: string[];
}

const NO_GPU_FOUND = "no NVIDIA GPU found: pass --arch <cc> to build for another machine (e.g. --arch 90)";

/** The GPU architectures of this machine, per nvidia-smi. */
export function detectCudaArchs(): string[] {
  const caps = findExecutable("nvidia-smi")
    ? outputOf("nvidia-smi", ["--query-gpu=compute_cap", "--format=csv,noheader"])
    : undefined;
  if (!caps?.trim()) throw new Error(NO_GPU_FOUND);
  return archsFromComputeCaps(caps);
}

/** Checks the tools a build needs; throws MissingPrerequisitesError naming all that are missing. */
export function checkGpuToolchain(backend: GpuBackend, arch: ArchRequest): GpuToolchain {
  const kit = backend === "cuda" ? checkCudaToolkit(arch) : checkVulkanToolkit();
  const problems = [...kit.problems, ...missingBuildTools()];
  if (problems.length > 0 || !kit.target) throw new MissingPrerequisitesError(problems);
  return { target: kit.target, toolkit: kit.toolkit, warnings: kit.warnings };
}

interface ToolkitCheck {
  target: GpuBuildTarget | undefined;
  toolkit: string;
  problems: string[];
  warnings: string[];
}

function checkCudaToolkit(arch: ArchRequest): ToolkitCheck {
  const check: ToolkitCheck = { target: undefined, toolkit: "", problems: [], warnings: [] };
  const driverCuda = driverCudaVersion((findExecutable("nvidia-smi") && outputOf("nvidia-smi", [])) || "");
  const nvcc = findExecutable("nvcc");
  const release = nvcc ? nvccReleaseLine(outputOf(nvcc, ["--version"]) ?? "") : undefined;
  if (!nvcc) check.problems.push(missingNvcc(driverCuda));
  else if (!release)
    check.problems.push(`${nvcc} --version printed no release line: reinstall the CUDA toolkit`);
  else check.toolkit = release;
  if (release && driverCuda && toolkitNewerThanDriver(release, driverCuda)) {
    check.warnings.push(
      `the CUDA toolkit (${release}) is newer than the driver's CUDA ${driverCuda} (nvidia-smi): ` +
        `the plugin may fail to load; update the driver or install ${cudaToolkitPackage(driverCuda)}`,
    );
  }
  try {
    check.target = { backend: "cuda", archs: arch === "auto" ? detectCudaArchs() : arch };
  } catch (error) {
    check.problems.push(error instanceof Error ? error.message : String(error));
  }
  return check;
}

function checkVulkanToolkit(): ToolkitCheck {
  const check: ToolkitCheck = { target: { backend: "vulkan" }, toolkit: "", problems: [], warnings: [] };
  const glslc = findExecutable("glslc");
  const version = glslc ? outputOf(glslc, ["--version"])?.split("\n")[0]?.trim() : undefined;
  if (!glslc) check.problems.push("glslc not found on PATH: install the shader compiler (Debian: glslc)");
  else if (!version) check.problems.push(`${glslc} --version failed: reinstall glslc`);
  else check.toolkit = version;
  if (!hasVulkanHeaders()) {
    check.problems.push("Vulkan headers (vulkan/vulkan.h) not found: install them (Debian: libvulkan-dev)");
  }
  return check;
}

function missingBuildTools(): string[] {
  const problems: string[] = [];
  if (!findExecutable("cmake")) problems.push("cmake not found on PATH: install cmake (Debian: cmake)");
  if (!hasCxxCompiler()) {
    problems.push("no C++ compiler found ($CXX, c++, g++ or clang++): install one (Debian: g++)");
  }
  if (!findExecutable("readelf")) {
    problems.push(
      "readelf not found on PATH (it checks the plugin's links): install binutils (Debian: binutils)",
    );
  }
  return problems;
}

function cudaToolkitPackage(driverCuda: string): string {
  return `cuda-toolkit-${driverCuda.replace(".", "-")}`;
}

function missingNvcc(driverCuda: string | undefined): string {
  const nvidiaPackage = driverCuda ? cudaToolkitPackage(driverCuda) : "cuda-toolkit-<version>";
  const limit = driverCuda
    ? `no newer than the driver's CUDA ${driverCuda} (nvidia-smi)`
    : "no newer than the CUDA version nvidia-smi shows for the driver";
  return (
    "nvcc not found on PATH: install the CUDA toolkit (Debian: nvidia-cuda-toolkit, or NVIDIA's " +
    `${nvidiaPackage}, then put /usr/local/cuda/bin on PATH), ${limit}`
  );
}

function hasCxxCompiler(): boolean {
  const cxx = process.env["CXX"]?.trim().split(/\s+/)[0];
  if (cxx) return findExecutable(cxx) !== undefined;
  return ["c++", "g++", "clang++"].some((name) => findExecutable(name) !== undefined);
}

function hasVulkanHeaders(): boolean {
  const sdk = process.env["VULKAN_SDK"];
  const includeDirs = [...(sdk ? [join(sdk, "include")] : []), "/usr/include", "/usr/local/include"];
  return includeDirs.some((dir) => existsSync(join(dir, "vulkan", "vulkan.h")));
}
