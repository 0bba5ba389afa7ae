import { parseEngineProfile, prefillQuadraticOf } from "../../core/profile/engine-profile-format.js";
import type { Quadratic } from "../../core/profile/quadratic.js";
import { DecodeTable } from "./decode-table.js";
import type { HardwareProfile } from "./profiles.js";
import { AccumulatingLatencyModel, type StepAccumulator } from "./step-latency.js";

/**
 * Step times for the real engine, from its measured profile:
 * - a prefill chunk of n tokens after c costs what the measured chunk grid says (piecewise-linear in c for
 *   each measured n, linear between sizes), minus the fixed per-step cost included in those times; without
 *   a grid, a((c+n)^2 - c^2) + b n (the prefill quadratic without its intercept, which stands for the fixed
 *   per-step cost);
 * - the decodes of a step cost what the decode table says for their count and mean context, fixed
 *   per-step cost included; a step with no decodes pays stepOverheadS instead.
 */
export class EngineProfileLatencyModel extends AccumulatingLatencyModel {
  readonly name: string;

  constructor(
    name: string,
    private readonly quadratic: Quadratic,
    private readonly decode: DecodeTable,
    private readonly stepOverheadS: number,
    /** measured single-chunk steps as a (tokens, context) grid, or null to use the quadratic */
    private readonly chunks: DecodeTable | null = null,
  ) {
    super();
    this.name = name;
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
  const profile = parseEngineProfile(json);
  const quadratic = prefillQuadraticOf(profile);
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
    maxContextTokens: profile.kvCapacityTokens,
    cpuOffloadBandwidthBps: profile.offload.cpuBandwidthBps,
    diskBandwidthBps: profile.offload.diskBandwidthBps,
    prefillQuadratic: quadratic,
  };
}
