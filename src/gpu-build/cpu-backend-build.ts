import { copyFileSync, existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  builtCpuBackendDir,
  builtCpuBackendFile,
  builtCpuBackendStampFile,
  type CpuBackendStamp,
  cpuBackendHost,
  readCpuBackendStamp,
} from "../engine/native/cpu-backend-location.js";
import { native } from "../engine/native/native-addon.js";
import { cmakeBuildArgs, cmakeConfigureArgs } from "./build-plan.js";
import { parseReadelfDynamic, pluginLinkProblem } from "./elf-links.js";
import { findExecutable, outputOf, runStreaming } from "./executables.js";

/**
 * ggml on its own, the CPU backend alone as a loadable library, compiled for this CPU. ggml refuses
 * GGML_NATIVE for loadable backends, so -march=native goes to the compiler directly (ggml's kernels pick
 * their paths from the compiler's feature macros).
 */
const CPU_BACKEND_FLAGS = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DGGML_BACKEND_DL=ON",
  "-DBUILD_SHARED_LIBS=ON",
  "-DGGML_NATIVE=OFF",
  "-DGGML_CPU_ALL_VARIANTS=OFF",
  // as the prebuilt backends: the engine runs its own ggml thread pools
  "-DGGML_OPENMP=OFF",
  "-DGGML_BUILD_TESTS=OFF",
  "-DGGML_BUILD_EXAMPLES=OFF",
  // bind to the engine's libggml-base.so, not a libggml-base.so.0 of the build tree (see build-plan.ts)
  "-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON",
  "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON",
];

export interface CpuBackendPlan {
  cmakeFlags: string[];
  configureArgs: string[];
  buildArgs: string[];
  builtLibrary: string;
}

/**
 * The cmake commands. `workarounds` are llama-server's build's compiler adjustments
 * (scripts/llama-source.mjs: -DCMAKE_C_FLAGS=..., -DCMAKE_CXX_FLAGS=...); -march=native leads each.
 */
export function planCpuBackendBuild(options: {
  ggmlDir: string;
  buildDir: string;
  jobs: number;
  ninja: boolean;
  workarounds: readonly string[];
}): CpuBackendPlan {
  const compilerFlags = (name: "C" | "CXX") => {
    const prefix = `-DCMAKE_${name}_FLAGS=`;
    const extra = options.workarounds.find((f) => f.startsWith(prefix))?.slice(prefix.length);
    return `${prefix}-march=native${extra ? ` ${extra}` : ""}`;
  };
  const cmakeFlags = [...CPU_BACKEND_FLAGS, compilerFlags("C"), compilerFlags("CXX")];
  return {
    cmakeFlags,
    configureArgs: cmakeConfigureArgs(options.ggmlDir, options.buildDir, options.ninja, cmakeFlags),
    buildArgs: cmakeBuildArgs(options.buildDir, "ggml-cpu", options.jobs),
    builtLibrary: join(options.buildDir, "bin", "libggml-cpu.so"),
  };
}

/** Why a built backend is not the one this machine would build now, or undefined when it is. */
export function cpuBackendRebuildReason(
  stamp: CpuBackendStamp | undefined,
  now: Pick<CpuBackendStamp, "commit" | "cmakeFlags" | "compiler" | "cpu" | "ggmlBase">,
): string | undefined {
  if (!stamp) return "not built yet";
  if (stamp.commit !== now.commit)
    return `llama.cpp commit changed (${stamp.commit.slice(0, 12)} -> ${now.commit.slice(0, 12)})`;
  if (stamp.ggmlBase !== now.ggmlBase) return "the installed llama.cpp libraries changed";
  if (stamp.cpu !== now.cpu) return "built on another CPU";
  if (stamp.compiler !== now.compiler) return `compiler changed (${stamp.compiler} -> ${now.compiler})`;
  if (stamp.cmakeFlags.join(" ") !== now.cmakeFlags.join(" ")) return "cmake flags changed";
  return undefined;
}

/** The shared source helper of scripts/, loaded on use (every other command works where only dist/ was copied). */
function buildScripts() {
  return import("../../scripts/llama-source.mjs");
}

/** `c++ --version` (the compiler cmake will find first), "" without one. */
function compilerVersionText(): string {
  return outputOf(process.env["CXX"] ?? "c++", ["--version"]) ?? "";
}

function acceptsNoAvx512Fp16(): boolean {
  const cxx = process.env["CXX"] ?? "c++";
  return (
    process.arch === "x64" && outputOf(cxx, ["-mno-avx512fp16", "-E", "-x", "c++", "/dev/null"]) !== undefined
  );
}

export async function describeCpuBackendBuild(projectRoot: string, jobs: number) {
  const scripts = await buildScripts();
  const sourceDir = scripts.llamaSourceDir(projectRoot);
  const versionText = compilerVersionText();
  // the whole text: GCC says it is GCC in its copyright line, not in the first one
  const compiler = versionText.split("\n")[0]!.trim();
  const plan = planCpuBackendBuild({
    ggmlDir: join(sourceDir, "ggml"),
    buildDir: join(builtCpuBackendDir(projectRoot), "build"),
    jobs,
    ninja: findExecutable("ninja") !== undefined,
    workarounds: scripts.compilerWorkarounds(versionText, acceptsNoAvx512Fp16()),
  });
  return { sourceDir, sourcePresent: existsSync(join(sourceDir, "ggml", "CMakeLists.txt")), plan, compiler };
}

/**
 * Builds ggml's CPU backend for this CPU from the pinned llama.cpp tree into builtCpuBackendFile(), unless
 * its stamp says this source, compiler, CPU and installed ggml-base built it already.
 */
export async function buildCpuBackend(options: {
  projectRoot: string;
  jobs: number;
  force: boolean;
  log: (line: string) => void;
}): Promise<{ library: string; built: boolean }> {
  const { projectRoot, log } = options;
  const scripts = await buildScripts();
  const source = scripts.ensureLlamaSource({ root: projectRoot, log });
  const { plan, compiler } = await describeCpuBackendBuild(projectRoot, options.jobs);
  native();
  const host = cpuBackendHost();
  if (host.ggmlBase === "")
    throw new Error("the engine's libggml-base.so is not loaded: the backend could not be bound to it");
  const now = { commit: source.meta.commit, cmakeFlags: plan.cmakeFlags, compiler, ...host };
  if (now.cpu === "")
    throw new Error(
      "this CPU cannot be identified (/proc/cpuinfo): a native build could not be told apart from another CPU's",
    );
  const library = builtCpuBackendFile(projectRoot);
  const stampFile = builtCpuBackendStampFile(projectRoot);
  const reason = existsSync(library)
    ? cpuBackendRebuildReason(readCpuBackendStamp(stampFile), now)
    : "not built yet";
  if (!reason && !options.force) {
    log(`up to date: ${library} (llama.cpp ${source.meta.llamaCppTag}, ${compiler})`);
    return { library, built: false };
  }
  log(`building: ${options.force ? "--force" : reason}`);
  const started = performance.now();
  const ggmlDir = join(source.dir, "ggml");
  const buildDir = join(builtCpuBackendDir(projectRoot), "build");
  // the standalone ggml build configures a pkg-config file from it; llama.cpp's tree does not carry one
  const pcTemplate = join(ggmlDir, "ggml.pc.in");
  if (!existsSync(pcTemplate)) writeFileSync(pcTemplate, "");
  scripts.removeStaleBuildDir(buildDir, ggmlDir);
  log(`configuring ggml ${source.meta.llamaCppTag} in ${buildDir}: cmake ${plan.cmakeFlags.join(" ")}`);
  await runStreaming("cmake", plan.configureArgs, "configuring");
  log(`building ggml-cpu with ${options.jobs} jobs (about half a minute on 2 cores)`);
  await runStreaming("cmake", plan.buildArgs, "building");
  const links = parseReadelfDynamic(outputOf("readelf", ["-d", plan.builtLibrary]) ?? "");
  const problem = pluginLinkProblem(plan.builtLibrary, links, buildDir);
  if (problem) throw new Error(problem);
  mkdirSync(builtCpuBackendDir(projectRoot), { recursive: true });
  // a serve starting meanwhile must never load a half-copied library
  const partial = `${library}.partial`;
  copyFileSync(plan.builtLibrary, partial);
  renameSync(partial, library);
  const seconds = (performance.now() - started) / 1000;
  const stamp: CpuBackendStamp = {
    ...now,
    llamaCppTag: source.meta.llamaCppTag,
    nodeLlamaCppVersion: source.meta.nodeLlamaCppVersion,
    buildSeconds: Math.round(seconds),
    builtAt: new Date().toISOString(),
  };
  writeFileSync(stampFile, `${JSON.stringify(stamp, null, 2)}\n`);
  log(`done in ${Math.round(seconds)} s: ${library} (serve, profile and bench load it from now on)`);
  return { library, built: true };
}
