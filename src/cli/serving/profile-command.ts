import { Command, InvalidArgumentError, Option } from "commander";
import { KV_LAYOUTS } from "../../engine/runners/model-runner.js";
import { BUILTIN_PRESETS } from "../../gguf/index.js";
import { measureProfileToFile, type ProfileFileOptions } from "../../profiler/profile-file.js";
import { positiveInt } from "../sim-options.js";

function intList(value: string): number[] {
  return value.split(",").map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n < 0)
      throw new InvalidArgumentError(`expected integers >= 0, got "${value}"`);
    return n;
  });
}

export function profileCommand(): Command {
  return new Command("profile")
    .description(
      "measure the llama.cpp engine (prefill vs context, prefill chunks after a context, decode vs batch and context, step overhead, " +
        "KV offload bandwidth) and write a continuum-profile JSON for simulate/serve --profile",
    )
    .option("--model <gguf>", "GGUF model file (default: the generated built-in model)")
    .addOption(
      new Option(
        "--builtin-model <preset>",
        "built-in model used without --model (default small; tiny with --quick; llama-3.1-8b-*, qwen3-8b-*: real 8B shapes)",
      ).choices(Object.keys(BUILTIN_PRESETS)),
    )
    .option("--model-name <name>", "model name recorded in the profile")
    .option(
      "--device <id>",
      "device id recorded in the profile (default cpu-<CPU model>, or <backend>-<GPU name> on a GPU)",
    )
    .option("--threads <n>", "CPU threads (default: cores - 1, as serve)", positiveInt)
    .option(
      "--max-num-batched-tokens <n>",
      "rows per llama_decode: prefill chunk size, as serve (default 512)",
      positiveInt,
    )
    .option("--kv-cache-tokens <n>", "KV cells of the pool, as serve (default 16384)", positiveInt)
    .addOption(
      new Option(
        "--kv-layout <layout>",
        "KV layout, as serve (default unified); streams gives each sequence of the largest decode batch, and one more, its own stream",
      ).choices(KV_LAYOUTS),
    )
    .option("--quick", "small plan on the tiny model: seconds (tests, smoke runs)", false)
    .option("--prefill-tokens <list>", "prefill lengths, e.g. 256,512,1024,2048,4096,8192", intList)
    .option("--decode-batches <list>", "decode batch sizes, e.g. 1,2,4,8,16,32", intList)
    .option("--decode-contexts <list>", "decode contexts per sequence, e.g. 0,512,2048,8192", intList)
    .option("--disk-dir <dir>", "directory for the disk-tier measurement (default: the OS temp dir)")
    .option("--out <file>", "where to write the profile", "continuum-profile.json")
    .option("--json", "print the profile JSON on stdout instead of a summary", false)
    .action(async (o: ProfileFileOptions) => {
      await measureProfileToFile(o);
    });
}
