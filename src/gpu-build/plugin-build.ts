import { copyFileSync, existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  builtPluginDir,
  builtPluginFile,
  builtPluginStampFile,
  type GpuBackend,
} from "../engine/gpu/plugin-location.js";
import { type GpuBuildPlan, type GpuBuildTarget, planGpuBuild } from "./build-plan.js";
import { type ArchRequest, checkGpuToolchain } from "./build-prerequisites.js";
import { type GpuBuildStamp, readBuildStamp, rebuildReason } from "./build-stamp.js";
import { parseReadelfDynamic, pluginLinkProblem } from "./elf-links.js";
import { findExecutable, outputOf, runStreaming } from "./executables.js";

export interface GpuPluginBuildOptions {
  projectRoot: string;
  backend: GpuBackend;
  arch: ArchRequest;
  jobs: number;
  force: boolean;
  /** Progress lines (the tools' own output goes to stderr directly). */
  log: (line: string) => void;
}

/** The cmake build tree of a backend's plugin. */
function pluginBuildDir(projectRoot: string, backend: GpuBackend): string {
  return join(builtPluginDir(projectRoot, backend), "build");
}

function planFor(projectRoot: string, target: GpuBuildTarget, sourceDir: string, jobs: number): GpuBuildPlan {
  return planGpuBuild({
    target,
    ggmlDir: join(sourceDir, "ggml"),
    buildDir: pluginBuildDir(projectRoot, target.backend),
    jobs,
    ninja: findExecutable("ninja") !== undefined,
  });
}

/**
 * The shared source helper of scripts/, loaded on use: every other command keeps working where only
 * dist/ was copied.
 */
function llamaSource() {
  return import("../../scripts/llama-source.mjs");
}

/** What a build would run (for --dry-run), found without the toolkit and without unpacking the source. */
export async function describeGpuBuild(
  projectRoot: string,
  target: GpuBuildTarget,
  jobs: number,
): Promise<{ sourceDir: string; sourcePresent: boolean; plan: GpuBuildPlan }> {
  const sourceDir = (await llamaSource()).llamaSourceDir(projectRoot);
  return {
    sourceDir,
    sourcePresent: existsSync(join(sourceDir, "ggml", "CMakeLists.txt")),
    plan: planFor(projectRoot, target, sourceDir, jobs),
  };
}

/**
 * Builds the backend's ggml plugin from the pinned llama.cpp tree into builtPluginFile(), unless the stamp
 * says the same commit, flags and toolkit built it already. Returns the plugin and whether it was built.
 */
export async function buildGpuPlugin(
  options: GpuPluginBuildOptions,
): Promise<{ plugin: string; built: boolean }> {
  const { projectRoot, backend, log } = options;
  const toolchain = checkGpuToolchain(backend, options.arch);
  for (const warning of toolchain.warnings) log(`warning: ${warning}`);
  const { ensureLlamaSource, removeStaleBuildDir } = await llamaSource();
  const source = ensureLlamaSource({ root: projectRoot, log });
  const plan = planFor(projectRoot, toolchain.target, source.dir, options.jobs);
  const ggmlDir = join(source.dir, "ggml");
  const buildDir = pluginBuildDir(projectRoot, backend);
  const plugin = builtPluginFile(projectRoot, backend);
  const stampFile = builtPluginStampFile(projectRoot, backend);
  const inputs = { commit: source.meta.commit, cmakeFlags: plan.cmakeFlags, toolkit: toolchain.toolkit };
  const reason = existsSync(plugin)
    ? rebuildReason(readBuildStamp(stampFile), inputs)
    : "no plugin built yet";
  if (!reason && !options.force) {
    log(`up to date: ${plugin} (llama.cpp ${source.meta.llamaCppTag}, ${toolchain.toolkit})`);
    return { plugin, built: false };
  }
  log(`building: ${options.force ? "--force" : reason}`);

  const started = performance.now();
  // The standalone ggml build configures a pkg-config file from it; llama.cpp's tree does not carry one.
  const pcTemplate = join(ggmlDir, "ggml.pc.in");
  if (!existsSync(pcTemplate)) writeFileSync(pcTemplate, "");
  removeStaleBuildDir(buildDir, ggmlDir);
  log(`configuring ggml ${source.meta.llamaCppTag} in ${buildDir}: cmake ${plan.cmakeFlags.join(" ")}`);
  await runStreaming("cmake", plan.configureArgs, "configuring");
  log(`building ggml-${backend} with ${options.jobs} jobs`);
  await runStreaming("cmake", plan.buildArgs, "building");

  const links = parseReadelfDynamic(outputOf("readelf", ["-d", plan.builtPlugin]) ?? "");
  const problem = pluginLinkProblem(plan.builtPlugin, links, buildDir);
  if (problem) throw new Error(problem);
  mkdirSync(builtPluginDir(projectRoot, backend), { recursive: true });
  // A serve starting meanwhile must never load a half-copied plugin.
  const partial = `${plugin}.partial`;
  copyFileSync(plan.builtPlugin, partial);
  renameSync(partial, plugin);
  const seconds = (performance.now() - started) / 1000;
  const stamp: GpuBuildStamp = {
    backend,
    nodeLlamaCppVersion: source.meta.nodeLlamaCppVersion,
    llamaCppTag: source.meta.llamaCppTag,
    ...inputs,
    arch: toolchain.target.backend === "cuda" ? toolchain.target.archs.join(";") : null,
    buildSeconds: Math.round(seconds),
    builtAt: new Date().toISOString(),
  };
  writeFileSync(stampFile, `${JSON.stringify(stamp, null, 2)}\n`);
  log(`done in ${Math.round(seconds)} s: ${plugin}`);
  return { plugin, built: true };
}
