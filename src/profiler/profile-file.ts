import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { KvLayout } from "../engine/runners/model-runner.js";
import type { BuiltinPreset } from "../gguf/index.js";
import { describeProfile } from "./build-profile.js";
import type { ProfilePlan } from "./measure.js";

/** What `continuum profile` measures and where it writes the profile. */
export interface ProfileFileOptions {
  model?: string;
  builtinModel?: BuiltinPreset;
  modelName?: string;
  device?: string;
  threads?: number;
  maxNumBatchedTokens?: number;
  kvCacheTokens?: number;
  kvLayout?: KvLayout;
  quick: boolean;
  prefillTokens?: number[];
  decodeBatches?: number[];
  decodeContexts?: number[];
  diskDir?: string;
  out: string;
  json: boolean;
}

/** Measures the engine and writes the profile; returns the document. */
export async function measureProfileToFile(
  o: ProfileFileOptions,
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  print: (text: string) => void = (text) => process.stdout.write(text),
) {
  const { runProfile } = await import("./run-profile.js");
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
    ...(o.kvLayout ? { kvLayout: o.kvLayout } : {}),
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
