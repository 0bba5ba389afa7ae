import { join } from "node:path";
import type { GpuBackend } from "../engine/gpu/plugin-location.js";
import { cudaArchitecturesValue } from "./cuda-arch.js";

/** What to build the plugin for: CUDA needs the GPU architectures, Vulkan compiles its shaders for any. */
export type GpuBuildTarget = { backend: "cuda"; archs: readonly string[] } | { backend: "vulkan" };

export interface GpuBuildPlan {
  cmakeFlags: string[];
  /** Arguments of `cmake` that configure the build tree. */
  configureArgs: string[];
  /** Arguments of `cmake` that build the plugin alone. */
  buildArgs: string[];
  /** Where the build leaves the plugin. */
  builtPlugin: string;
}

/** ggml on its own (no llama), only the GPU backend, as plugins loaded at run time. */
const COMMON_FLAGS = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DGGML_BACKEND_DL=ON",
  "-DBUILD_SHARED_LIBS=ON",
  "-DGGML_NATIVE=OFF",
  "-DGGML_CPU=OFF",
  "-DGGML_BUILD_TESTS=OFF",
  "-DGGML_BUILD_EXAMPLES=OFF",
  // ggml gives ggml-base the SONAME libggml-base.so.0, so the plugin would need a second ggml-base beside
  // the engine's: the prebuilt one it has loaded is libggml-base.so.
  "-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON",
  // The build-tree RUNPATH names ggml-base's folder; relative to $ORIGIN it leads nowhere once copied out.
  "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON",
];

function cmakeFlagsFor(target: GpuBuildTarget): string[] {
  if (target.backend === "cuda") {
    return [
      ...COMMON_FLAGS,
      "-DGGML_CUDA=ON",
      `-DCMAKE_CUDA_ARCHITECTURES=${cudaArchitecturesValue(target.archs)}`,
    ];
  }
  return [...COMMON_FLAGS, "-DGGML_VULKAN=ON"];
}

function pluginTargetName(backend: GpuBackend): string {
  return `ggml-${backend}`;
}

export function planGpuBuild(options: {
  target: GpuBuildTarget;
  /** The ggml/ folder of the llama.cpp tree. */
  ggmlDir: string;
  buildDir: string;
  jobs: number;
  ninja: boolean;
}): GpuBuildPlan {
  const cmakeFlags = cmakeFlagsFor(options.target);
  const backend = options.target.backend;
  return {
    cmakeFlags,
    configureArgs: cmakeConfigureArgs(options.ggmlDir, options.buildDir, options.ninja, cmakeFlags),
    buildArgs: cmakeBuildArgs(options.buildDir, pluginTargetName(backend), options.jobs),
    builtPlugin: join(options.buildDir, "bin", `lib${pluginTargetName(backend)}.so`),
  };
}

/** `cmake` arguments that configure ggml's tree in buildDir (Ninja where there is one). */
export function cmakeConfigureArgs(
  ggmlDir: string,
  buildDir: string,
  ninja: boolean,
  cmakeFlags: readonly string[],
): string[] {
  return ["-S", ggmlDir, "-B", buildDir, ...(ninja ? ["-G", "Ninja"] : []), ...cmakeFlags];
}

/** `cmake` arguments that build one target with `jobs` parallel jobs. */
export function cmakeBuildArgs(buildDir: string, target: string, jobs: number): string[] {
  return ["--build", buildDir, "--target", target, "-j", String(jobs)];
}
