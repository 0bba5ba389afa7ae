import { z } from "zod";
import { DecodeTable } from "./decode-table.js";
import type { HardwareProfile } from "./profiles.js";
import { fitQuadratic, type Quadratic } from "./quadratic-fit.js";
import {
  chunkedPrefillS,
  DEFAULT_PREFILL_CHUNK_TOKENS,
  type LatencyModel,
  type StepAccumulator,
  type StepChunk,
} from "./step-latency.js";

export const ENGINE_PROFILE_FORMAT = "continuum-profile";
export const ENGINE_PROFILE_VERSION = 1;

const seconds = z.number().nonnegative();
const positive = z.number().positive();

/** The file `continuum profile` writes (docs/profile-format.md). */
export const engineProfileSchema = z.object({
  format: z.literal(ENGINE_PROFILE_FORMAT),
  version: z.literal(ENGINE_PROFILE_VERSION),
  device: z.string().min(1),
  model: z.string().min(1),
  threads: z.number().int().positive(),
  kvBytesPerToken: positive,
  kvCapacityTokens: z.number().int().positive(),
  prefill: z.object({
    points: z.array(z.object({ tokens: z.number().int().positive(), seconds })).min(1),
    quadratic: z.object({ a: z.number(), b: z.number(), c: z.number() }).optional(),
    /** optional: steps prefilling `tokens` new tokens after `contextTokens` of the same sequence */
    chunks: z
      .array(
        z.object({
          tokens: z.number().int().positive(),
          contextTokens: z.number().int().nonnegative(),
          seconds,
        }),
      )
      .min(1)
      .optional(),
  }),
  decode: z.object({
    points: z
      .array(
        z.object({
          batch: z.number().int().positive(),
          contextTokens: z.number().int().nonnegative(),
          seconds,
        }),
      )
      .min(1),
  }),
  stepOverheadS: seconds,
  offload: z.object({ cpuBandwidthBps: positive, diskBandwidthBps: positive }),
});

export type EngineProfileJson = z.infer<typeof engineProfileSchema>;

/**
 * Step times for the real engine, from its measured profile:
 * - a prefill chunk of n tokens after c costs what the measured chunk grid says (piecewise-linear in c for
 *   each measured n, linear between sizes), minus the fixed per-step cost included in those times; without
 *   a grid, a((c+n)^2 - c^2) + b n (the prefill quadratic without its intercept, which stands for the fixed
 *   per-step cost);
 * - the decodes of a step cost what the decode table says for their count and mean context, fixed
 *   per-step cost included; a step with no decodes pays stepOverheadS instead.
 */
export class EngineProfileLatencyModel implements LatencyModel {
  readonly name: string;
  private readonly ownAccumulator: StepAccumulator;

  constructor(
    name: string,
    private readonly quadratic: Quadratic,
    private readonly decode: DecodeTable,
    private readonly stepOverheadS: number,
    /** measured single-chunk steps as a (tokens, context) grid, or null to use the quadratic */
    private readonly chunks: DecodeTable | null = null,
  ) {
    this.name = name;
    this.ownAccumulator = this.newAccumulator();
  }

  stepS(chunks: readonly StepChunk[]): number {
    const acc = this.ownAccumulator;
    acc.beginStep();
    // indexed: no iterator object per call (stepS runs ~10^6 times per sweep)
    for (let i = 0; i < chunks.length; i++) {
      const chunk = chunks[i]!;
      acc.addChunk(chunk.numTokens, chunk.contextTokens);
    }
    return acc.endStepS();
  }

  prefillS(tokens: number, chunkTokens: number = DEFAULT_PREFILL_CHUNK_TOKENS): number {
    return chunkedPrefillS(this.ownAccumulator, tokens, chunkTokens);
  }

  newAccumulator(): StepAccumulator {
    const { a, b } = this.quadratic;
    const chunkTable = this.chunks;
    let chunks = 0;
    let decodes = 0;
    let decodeContextTokens = 0;
    let prefillS = 0;
    return {
      beginStep: () => {
        chunks = 0;
        decodes = 0;
        decodeContextTokens = 0;
        prefillS = 0;
      },
      addChunk: (numTokens, contextTokens) => {
        if (numTokens <= 0) return;
        chunks++;
        if (numTokens === 1) {
          decodes++;
          decodeContextTokens += contextTokens;
        } else if (chunkTable) {
          prefillS += Math.max(0, chunkTable.seconds(numTokens, contextTokens) - this.stepOverheadS);
        } else {
          const end = contextTokens + numTokens;
          prefillS += Math.max(0, a * (end * end - contextTokens * contextTokens) + b * numTokens);
        }
      },
      endStepS: () => {
        if (chunks === 0) return 0;
        const fixedS =
          decodes > 0 ? this.decode.seconds(decodes, decodeContextTokens / decodes) : this.stepOverheadS;
        return fixedS + prefillS;
      },
    };
  }
}

/** Reads a parsed profile file (unknown JSON) into a HardwareProfile; throws naming every bad field. */
export function loadEngineProfile(json: unknown): HardwareProfile {
  const header = z.object({ format: z.unknown(), version: z.unknown() }).partial().safeParse(json);
  if (header.success && header.data.format !== ENGINE_PROFILE_FORMAT) {
    throw new Error(
      `not a continuum profile: format is ${JSON.stringify(header.data.format)}, expected "${ENGINE_PROFILE_FORMAT}"`,
    );
  }
  if (header.success && header.data.version !== ENGINE_PROFILE_VERSION) {
    throw new Error(
      `unsupported continuum profile version ${JSON.stringify(header.data.version)}: this build reads version ${ENGINE_PROFILE_VERSION}`,
    );
  }
  const parsed = engineProfileSchema.safeParse(json);
  if (!parsed.success) throw new Error(`invalid continuum profile:\n${z.prettifyError(parsed.error)}`);
  const profile = parsed.data;
  const quadratic = profile.prefill.quadratic ?? fitPrefillPoints(profile.prefill.points);
  const name = `${profile.device} x${profile.threads} / ${profile.model} (measured)`;
  return {
    id: `engine/${profile.device}/${profile.model}`,
    gpu: profile.device,
    model: profile.model,
    tensorParallel: 1,
    latency: new EngineProfileLatencyModel(
      name,
      quadratic,
      new DecodeTable(profile.decode.points, quadratic),
      profile.stepOverheadS,
      profile.prefill.chunks
        ? new DecodeTable(
            profile.prefill.chunks.map((p) => ({
              batch: p.tokens,
              contextTokens: p.contextTokens,
              seconds: p.seconds,
            })),
            quadratic,
            true,
          )
        : null,
    ),
    kvBytesPerToken: profile.kvBytesPerToken,
    kvCapacityTokens: profile.kvCapacityTokens,
    cpuOffloadBandwidthBps: profile.offload.cpuBandwidthBps,
    diskBandwidthBps: profile.offload.diskBandwidthBps,
    prefillQuadratic: quadratic,
  };
}

function fitPrefillPoints(points: readonly { tokens: number; seconds: number }[]): Quadratic {
  if (new Set(points.map((p) => p.tokens)).size < 3) {
    throw new Error(
      "invalid continuum profile: prefill.quadratic is missing and prefill.points has fewer than 3 distinct token counts to fit it from",
    );
  }
  return fitQuadratic(
    points.map((p) => p.tokens),
    points.map((p) => p.seconds),
  );
}
