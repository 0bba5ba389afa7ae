/**
 * The engine profile format (`continuum profile` writes it, docs/profile-format.md): what the engine,
 * the simulator and the command line all read. Parsing checks the header first, so a wrong file says
 * what it is; the prefill curve is the file's quadratic or one fitted to its points.
 */
import { z } from "zod";
import { fitQuadratic, type Quadratic } from "./quadratic.js";

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
  /** optional: where it was measured (profiles written before it lack it) */
  deviceInfo: z
    .object({
      backend: z.string().min(1),
      device: z.string(),
      memoryBytes: z.number().nonnegative(),
      layersOffloaded: z.number().int().nonnegative(),
      layersTotal: z.number().int().nonnegative(),
      kvCache: z.enum(["gpu", "cpu", "split"]),
    })
    .optional(),
});

export type EngineProfileJson = z.infer<typeof engineProfileSchema>;

/** Reads parsed JSON as a profile; throws naming what is wrong (format, version, every bad field). */
export function parseEngineProfile(json: unknown): EngineProfileJson {
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
  return parsed.data;
}

/** The profile's prefill curve: its own quadratic, or a least-squares fit of its measured points. */
export function prefillQuadraticOf(profile: EngineProfileJson): Quadratic {
  if (profile.prefill.quadratic) return profile.prefill.quadratic;
  const points = profile.prefill.points;
  if (new Set(points.map((p) => p.tokens)).size < 3) {
    throw new Error(
      "invalid continuum profile: prefill.quadratic is missing and prefill.points has fewer than 3 distinct token counts to fit it from",
    );
  }
  return fitQuadratic(points.map((p) => ({ x: p.tokens, y: p.seconds })));
}
