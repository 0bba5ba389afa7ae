import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { BUILTIN_PRESETS, type BuiltinPreset } from "../engine/gguf/index.js";
import type { ProfilePlan } from "../engine/profile/measure.js";
import { positiveInt } from "./sim-options.js";

export interface ProfileCliOptions {
  model?: string;
  builtinModel?: BuiltinPreset;
  modelName?: string;
  device?: string;
  threads?: number;
  maxNumBatchedTokens?: number;
  kvCacheTokens?: number;
  quick: boolean;
  prefillTokens?: number[];
  decodeBatches?: number[];
  decodeContexts?: number[];
  diskDir?: string;
  out: string;
  json: boolean;
}

function intList(value: string): number[] {
  return value.split(",").map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n < 0)
      throw new InvalidArgumentError(`expected integers >= 0, got "${value}"`);
    return n;
  });
}

/** Measures the engine and writes the profile; returns the document. */
export async function runProfileCommand(
  o: ProfileCliOptions,
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  print: (text: string) => void = (text) => process.stdout.write(text),
) {
  const { runProfile } = await import("../engine/profile/run-profile.js");
  const { describeProfile } = await import("../engine/profile/build-profile.js");
  const plan: Partial<ProfilePlan> = {
    ...(o.prefillTokens ? { prefillTokens: o.prefillTokens.filter((t) => t > 0) } : {}),
    ...(o.decodeBatches ? { decodeBatches: o.decodeBatches.filter((b) => b > 0) } : {}),
    ...(o.decodeContexts ? { decodeContexts: o.decodeContexts } : {}),
  };
  const profile = await runProfile({
    ...(o.model ? { modelPath: o.model } : {}),
    ...(o.builtinModel ? { builtinModel: o.builtinModel } : {}),
    ...(o.modelName ? { modelName: o.modelName } : {}),
    ...(o.device ? { device: o.device } : {}),
    ...(o.threads ? { threads: o.threads } : {}),
    ...(o.maxNumBatchedTokens ? { nBatch: o.maxNumBatchedTokens } : {}),
    ...(o.kvCacheTokens ? { kvCacheTokens: o.kvCacheTokens } : {}),
    ...(o.diskDir ? { diskDir: o.diskDir } : {}),
    quick: o.quick,
    plan,
    log,
  });
  const text = `${JSON.stringify(profile, null, 2)}\n`;
  await mkdir(dirname(o.out), { recursive: true });
  await writeFile(`${o.out}.tmp`, text);
  await rename(`${o.out}.tmp`, o.out);
  if (o.json) print(text);
  else {
    print(`${describeProfile(profile)}\n`);
    print(
      `wrote ${o.out} in ${profile.notes.seconds.toFixed(1)} s; use it with \`continuum simulate --profile ${o.out}\` ` +
        `or \`continuum serve --profile ${o.out}\`\n`,
    );
  }
  return profile;
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
        "built-in model used without --model (default small; tiny with --quick)",
      ).choices(Object.keys(BUILTIN_PRESETS)),
    )
    .option("--model-name <name>", "model name recorded in the profile")
    .option("--device <id>", "device id recorded in the profile (default cpu-<CPU model>)")
    .option("--threads <n>", "CPU threads (default: cores - 1, as serve)", positiveInt)
    .option(
      "--max-num-batched-tokens <n>",
      "rows per llama_decode: prefill chunk size, as serve (default 512)",
      positiveInt,
    )
    .option("--kv-cache-tokens <n>", "KV cells of the pool, as serve (default 16384)", positiveInt)
    .option("--quick", "small plan on the tiny model: seconds (tests, smoke runs)", false)
    .option("--prefill-tokens <list>", "prefill lengths, e.g. 256,512,1024,2048,4096,8192", intList)
    .option("--decode-batches <list>", "decode batch sizes, e.g. 1,2,4,8,16,32", intList)
    .option("--decode-contexts <list>", "decode contexts per sequence, e.g. 0,512,2048,8192", intList)
    .option("--disk-dir <dir>", "directory for the disk-tier measurement (default: the OS temp dir)")
    .option("--out <file>", "where to write the profile", "continuum-profile.json")
    .option("--json", "print the profile JSON on stdout instead of a summary", false)
    .action(async (o: ProfileCliOptions) => {
      await runProfileCommand(o);
    });
}
