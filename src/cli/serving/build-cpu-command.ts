import { availableParallelism } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { builtCpuBackendFile, builtCpuBackendStampFile } from "../../engine/native/cpu-backend-location.js";
import { findProjectRoot } from "../../engine/native/llama-native.js";
import { buildCpuBackend, describeCpuBackendBuild } from "../../gpu-build/cpu-backend-build.js";
import { positiveInt } from "../sim-options.js";
import { shellWord } from "./build-gpu-command.js";

interface BuildCpuOptions {
  jobs: number;
  dryRun: boolean;
  force: boolean;
}

export function buildCpuCommand(): Command {
  return new Command("build-cpu")
    .description(
      "compile ggml's CPU backend for this CPU (-march=native) from the pinned llama.cpp source; serve, " +
        "profile and bench then load it instead of the prebuilt variant (CONTINUUM_GGML_CPU=<variant> picks a prebuilt one)",
    )
    .option("--jobs <n>", "parallel compile jobs", positiveInt, availableParallelism())
    .option("--dry-run", "print the commands it would run, build nothing", false)
    .option("--force", "build even when the backend is up to date", false)
    .action(async (o: BuildCpuOptions) => {
      try {
        if (o.dryRun) await printDryRun(o);
        else
          await buildCpuBackend({
            projectRoot: findProjectRoot(),
            jobs: o.jobs,
            force: o.force,
            log: (line) => process.stderr.write(`build-cpu: ${line}\n`),
          });
      } catch (error) {
        process.stderr.write(
          `continuum build-cpu: ${error instanceof Error ? error.message : String(error)}\n`,
        );
        process.exitCode = 1;
      }
    });
}

async function printDryRun(o: BuildCpuOptions): Promise<void> {
  const root = findProjectRoot();
  const { sourceDir, sourcePresent, plan, compiler } = await describeCpuBackendBuild(root, o.jobs);
  const sourceState = sourcePresent
    ? "present"
    : "not there yet: unpacked from the pinned node-llama-cpp tarball first";
  const lines = [
    `# llama.cpp source: ${sourceDir} (${sourceState}); compiler: ${compiler || "none found"}`,
    `touch ${shellWord(join(sourceDir, "ggml", "ggml.pc.in"))}`,
    `cmake ${plan.configureArgs.map(shellWord).join(" ")}`,
    `cmake ${plan.buildArgs.map(shellWord).join(" ")}`,
    `readelf -d ${shellWord(plan.builtLibrary)}  # must need libggml-base.so, no RUNPATH into the build tree`,
    `cp ${shellWord(plan.builtLibrary)} ${shellWord(builtCpuBackendFile(root))}`,
    `# then records commit, flags, compiler, this CPU and the installed ggml-base in ${builtCpuBackendStampFile(root)}`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}
