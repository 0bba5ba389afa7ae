import { MemoryfulnessEstimator } from "./memoryfulness.js";
import { QueueingDelayWindow } from "./queueing-delay.js";
import { ToolHistory } from "./tool-history.js";

/** The paper's K: below this many samples an empirical CDF is not trusted. */
export const COLD_START_SAMPLES = 100;

/** T_default: the optimal tau if tool durations were Exp(1) s and eta = 1: argmax (1 − e^−tau)·B − tau = max(0, ln B). */
export function defaultTtlS(benefitS: number): number {
  return benefitS > 1 ? Math.log(benefitS) : 0;
}

export type TtlSource = "tool" | "global" | "default";

export interface TtlDecision {
  ttlS: number;
  source: TtlSource;
  /** The B of eq. 2 the TTL was chosen for. */
  benefitS: number;
}

export interface TtlInputs {
  /** Tool the program is about to call. */
  tool: string;
  /** PrefillReload(r): seconds to re-create this request's context if its KV cache is evicted. */
  prefillReloadS: number;
}

export interface TtlEstimatorOptions {
  coldStartSamples?: number;
  queueWindow?: number;
  sampleWindow?: number;
}

/** CalcTTL of Algorithm 1: picks how long to pin a finished request's KV cache during its tool call. */
export class TtlEstimator {
  readonly tools: ToolHistory;
  readonly memoryfulness = new MemoryfulnessEstimator();
  readonly queueing: QueueingDelayWindow;
  /** how many TTLs each rule of the cold-start ladder has set */
  readonly decisionsBySource: Record<TtlSource, number> = { default: 0, global: 0, tool: 0 };
  private readonly coldStartSamples: number;

  constructor(opts: TtlEstimatorOptions = {}) {
    this.coldStartSamples = opts.coldStartSamples ?? COLD_START_SAMPLES;
    if (!Number.isInteger(this.coldStartSamples) || this.coldStartSamples < 0) {
      throw new RangeError(`coldStartSamples must be an integer >= 0, got ${this.coldStartSamples}`);
    }
    this.tools = new ToolHistory({ sampleWindow: opts.sampleWindow });
    this.queueing = new QueueingDelayWindow(opts.queueWindow);
  }

  /** eq. 2 with the paper's cold-start ladder: |S| <= K -> T_default(B with eta = 1); |S[f]| <= K -> global CDF; else the tool's CDF. B = T*eta + prefillReloadS. */
  decide(inputs: TtlInputs): TtlDecision {
    const decision = this.chooseTtl(inputs);
    this.decisionsBySource[decision.source]++;
    return decision;
  }

  private chooseTtl(inputs: TtlInputs): TtlDecision {
    const { prefillReloadS } = inputs;
    if (!Number.isFinite(prefillReloadS) || prefillReloadS < 0) {
      throw new RangeError(`prefillReloadS must be a finite number of seconds >= 0, got ${prefillReloadS}`);
    }
    const queueingS = this.queueing.meanS();
    const k = this.coldStartSamples;
    if (this.tools.totalRecorded <= k) {
      const benefitS = queueingS + prefillReloadS;
      return { ttlS: defaultTtlS(benefitS), source: "default", benefitS };
    }
    const benefitS = queueingS * this.memoryfulness.eta() + prefillReloadS;
    if (this.tools.recordedFor(inputs.tool) > k) {
      // recordedFor > 0 guarantees the bucket exists.
      const ttlS = this.tools.forTool(inputs.tool)!.bestTtlS(benefitS);
      return { ttlS, source: "tool", benefitS };
    }
    return { ttlS: this.tools.global.bestTtlS(benefitS), source: "global", benefitS };
  }
}
