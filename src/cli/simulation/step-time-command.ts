import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { describeStepPart, parseReferenceSteps, type StepPart } from "../../core/profile/step-reference.js";
import { getRooflineModel } from "../../sim/hardware/profiles.js";
import type { StepBreakdown } from "../../sim/hardware/roofline-model.js";
import { KV_CACHE_DTYPES, type KvCacheDtype } from "../../sim/hardware/roofline-spec.js";
import { chunksOf, type Fidelity, fidelityOf, stepTimeOf } from "../../sim/hardware/step-fidelity.js";

interface StepTimeOptions {
  hardware: string;
  model: string;
  kvCacheDtype: KvCacheDtype;
  decode: StepPart[];
  prefill: StepPart[];
  reference?: string;
  json: boolean;
}

export function decodePart(value: string, previous: StepPart[]): StepPart[] {
  const match = /^(\d+)x(\d+)$/.exec(value.trim());
  if (!match || Number(match[1]) < 1) {
    throw new InvalidArgumentError(`expected BxL with B >= 1 (e.g. 64x2048), got "${value}"`);
  }
  return [...previous, { kind: "decode", B: Number(match[1]), L: Number(match[2]) }];
}

export function prefillPart(value: string, previous: StepPart[]): StepPart[] {
  const match = /^(\d+)\+(\d+)$/.exec(value.trim());
  if (!match || Number(match[1]) < 1) {
    throw new InvalidArgumentError(`expected N+P with N >= 1 (e.g. 512+0), got "${value}"`);
  }
  return [...previous, { kind: "prefill", N: Number(match[1]), P: Number(match[2]) }];
}

const ms = (s: number) => s * 1e3;

function breakdownMs(b: StepBreakdown) {
  return {
    gemm: ms(b.linearS),
    elementwise: ms(b.elementwiseS),
    lm_head: ms(b.lmHeadS),
    prefill_attention: ms(b.prefillAttentionS),
    decode_attention: ms(b.decodeAttentionS),
    all_reduce: ms(b.allReduceS),
  };
}

const signedPercent = (error: number) => `${error >= 0 ? "+" : ""}${(error * 100).toFixed(1)}%`;

/** A Markdown table of every step, then the median and the worst (docs/simulator.md's fidelity table). */
export function formatFidelity(fidelity: Fidelity): string {
  const rows = fidelity.rows.map(
    (r) =>
      `| ${r.shape} | ${r.measuredMs.toFixed(2)} | ${r.modelMs.toFixed(2)} | ${signedPercent(r.error)} |`,
  );
  const { worst } = fidelity;
  return [
    "| step | measured ms | model ms | error |",
    "|---|---:|---:|---:|",
    ...rows,
    "",
    `${fidelity.rows.length} steps: median |error| ${(fidelity.medianAbsError * 100).toFixed(1)}%, worst ${worst.shape} ${signedPercent(worst.error)}`,
  ].join("\n");
}

export function stepTimeCommand(): Command {
  return new Command("step-time")
    .description(
      "the simulator's time for one engine step of a given shape (kernels, then the fixed per-step overhead), or for every step of a measured reference file",
    )
    .option("--hardware <gpu>", "GPU: a100, h100, h200, b200", "h100")
    .option("--model <model>", "model: llama-3.1-8b, llama-3.1-70b, gemma-3-12b", "llama-3.1-8b")
    .addOption(
      new Option("--kv-cache-dtype <dtype>", "KV cache element type: fp8 halves the KV bytes attention reads")
        .choices([...KV_CACHE_DTYPES])
        .default("bf16"),
    )
    .option(
      "--decode <BxL>",
      "B sequences decoding one token after L tokens of KV each (repeatable)",
      decodePart,
      [],
    )
    .option(
      "--prefill <N+P>",
      "N new tokens of one sequence after P cached ones (repeatable)",
      prefillPart,
      [],
    )
    .option(
      "--reference <steps.jsonl>",
      'instead of a shape: every {"kind":"prefill","N","P","ms"} and {"kind":"decode","B","L","ms"} line of a file of measured kernel times beside the model\'s',
    )
    .option("--json", "print JSON", false)
    .action((o: StepTimeOptions) => {
      const model = getRooflineModel(o.hardware, o.model, o.kvCacheDtype);
      const parts = [...o.decode, ...o.prefill];
      if (o.reference) {
        if (parts.length > 0)
          throw new Error("--reference prices its own steps: give it without --decode/--prefill");
        let steps: ReturnType<typeof parseReferenceSteps>;
        try {
          steps = parseReferenceSteps(readFileSync(o.reference, "utf8"));
        } catch (error) {
          throw new Error(`${o.reference}: ${error instanceof Error ? error.message : String(error)}`);
        }
        const fidelity = fidelityOf(model, steps);
        if (o.json) {
          const row = (r: Fidelity["worst"]) => ({
            step: r.shape,
            measured_ms: r.measuredMs,
            model_ms: r.modelMs,
            error: r.error,
          });
          const result = {
            hardware: o.hardware,
            model: o.model,
            reference: o.reference,
            steps: fidelity.rows.map(row),
            median_abs_error: fidelity.medianAbsError,
            worst: row(fidelity.worst),
          };
          process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
        } else {
          process.stdout.write(`${formatFidelity(fidelity)}\n`);
        }
        return;
      }
      if (parts.length === 0) {
        throw new Error(
          "give the step: --decode BxL and/or --prefill N+P (each repeatable), or --reference <file>",
        );
      }
      const time = stepTimeOf(model, chunksOf(parts));
      if (o.json) {
        const result = {
          hardware: o.hardware,
          model: o.model,
          kv_cache_dtype: o.kvCacheDtype,
          decode: parts.flatMap((p) => (p.kind === "decode" ? [{ B: p.B, L: p.L }] : [])),
          prefill: parts.flatMap((p) => (p.kind === "prefill" ? [{ N: p.N, P: p.P }] : [])),
          ms: ms(time.kernelS),
          overhead_ms: ms(time.overheadS),
          step_ms: ms(time.kernelS + time.overheadS),
          kernels_ms: breakdownMs(time.breakdown),
        };
        process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
        return;
      }
      const kernels = Object.entries(breakdownMs(time.breakdown))
        .filter(([, v]) => v > 0)
        .map(([name, v]) => `${name.replace("_", " ")} ${v.toFixed(2)}`)
        .join(", ");
      process.stdout.write(
        [
          `${o.hardware} / ${o.model}, KV cache ${o.kvCacheDtype}: ${parts.map(describeStepPart).join(" + ")}`,
          `kernels   ${ms(time.kernelS).toFixed(2)} ms (${kernels})`,
          `overhead  ${ms(time.overheadS).toFixed(2)} ms (scheduling and sampling outside the kernels, once per step)`,
          `step      ${ms(time.kernelS + time.overheadS).toFixed(2)} ms`,
        ].join("\n") + "\n",
      );
    });
}
