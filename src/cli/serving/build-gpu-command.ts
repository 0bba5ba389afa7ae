import { availableParallelism } from "node:os";
import { join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import {
  builtPluginFile,
  builtPluginStampFile,
  GPU_BACKENDS,
  type GpuBackend,
} from "../../engine/gpu/plugin-location.js";
import { findProjectRoot } from "../../engine/native/llama-native.js";
import type { GpuBuildTarget } from "../../gpu-build/build-plan.js";
import {
  type ArchRequest,
  detectCudaArchs,
  MissingPrerequisitesError,
} from "../../gpu-build/build-prerequisites.js";
import { parseArchOption } from "../../gpu-build/cuda-arch.js";
import { buildGpuPlugin, describeGpuBuild } from "../../gpu-build/plugin-build.js";
import { positiveInt } from "../sim-options.js";

interface BuildGpuOptions {
  backend: GpuBackend;
  arch: ArchRequest;
  jobs: number;
  dryRun: boolean;
  force: boolean;
}

function archOption(value: string): ArchRequest {
  if (value === "auto") return "auto";
  try {
    return parseArchOption(value);
  } catch (error) {
    throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
  }
}

export function buildGpuCommand(): Command {
  return new Command("build-gpu")
    .description(
      "build ggml's GPU plugin from the pinned llama.cpp source with this machine's toolkit " +
        "(serve and profile load it for --gpu-layers)",
    )
    .addOption(new Option("--backend <backend>", "GPU backend").choices(GPU_BACKENDS).default("cuda"))
    .option(
      "--arch <cc>",
      "CUDA architectures: auto (the GPUs nvidia-smi lists) or e.g. 90, 8.6, 86;90",
      archOption,
      "auto",
    )
    .option("--jobs <n>", "parallel compile jobs", positiveInt, availableParallelism())
    .option("--dry-run", "print the commands it would run, build nothing", false)
    .option("--force", "build even when the plugin is up to date", false)
    .action(async (o: BuildGpuOptions) => {
      try {
        if (o.dryRun) await printDryRun(o);
        else await build(o);
      } catch (error) {
        const lines =
          error instanceof MissingPrerequisitesError
            ? error.problems
            : [error instanceof Error ? error.message : String(error)];
        for (const line of lines) process.stderr.write(`continuum build-gpu: ${line}\n`);
        process.exitCode = 1;
      }
    });
}

async function build(o: BuildGpuOptions): Promise<void> {
  await buildGpuPlugin({
    projectRoot: findProjectRoot(),
    backend: o.backend,
    arch: o.arch,
    jobs: o.jobs,
    force: o.force,
    log: (line) => process.stderr.write(`build-gpu: ${line}\n`),
  });
}

async function printDryRun(o: BuildGpuOptions): Promise<void> {
  const root = findProjectRoot();
  const target: GpuBuildTarget =
    o.backend === "cuda"
      ? { backend: "cuda", archs: o.arch === "auto" ? detectCudaArchs() : o.arch }
      : { backend: "vulkan" };
  const { sourceDir, sourcePresent, plan } = await describeGpuBuild(root, target, o.jobs);
  const ggmlDir = join(sourceDir, "ggml");
  const sourceState = sourcePresent
    ? "present"
    : "not there yet: unpacked from the pinned node-llama-cpp tarball first";
  const lines = [
    `# llama.cpp source: ${sourceDir} (${sourceState})`,
    `touch ${shellWord(join(ggmlDir, "ggml.pc.in"))}`,
    `cmake ${plan.configureArgs.map(shellWord).join(" ")}`,
    `cmake ${plan.buildArgs.map(shellWord).join(" ")}`,
    `readelf -d ${shellWord(plan.builtPlugin)}  # must need libggml-base.so, no RUNPATH into the build tree`,
    `cp ${shellWord(plan.builtPlugin)} ${shellWord(builtPluginFile(root, o.backend))}`,
    `# then records commit, flags and toolkit in ${builtPluginStampFile(root, o.backend)}`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
