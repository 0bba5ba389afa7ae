import { AccumulatingLatencyModel, type StepAccumulator, type StepChunk } from "./step-latency.js";

/** Every number the analytic model uses, per GPU of a tensor-parallel group (see roofline-spec.ts). */
export interface RooflineSpec {
  readonly name: string;
  /** scheduling, sampling and launch time outside the kernels, once per step */
  readonly stepOverheadS: number;
  /** QKV/output/MLP weights this GPU streams every step, and the matmul FLOPs per batched token */
  readonly linearWeightBytes: number;
  readonly linearFlopsPerToken: number;
  /** logits: one row per chunk in the step */
  readonly lmHeadWeightBytes: number;
  readonly lmHeadFlopsPerRow: number;
  readonly hbmBandwidthBps: number;
  readonly weightReadEfficiency: number;
  /** per layer: fixed time of the small kernels between the GEMMs (norms, RoPE, activation, residual adds) */
  readonly layerKernelsS: number;
  /** activation bytes one token moves through those kernels in all layers, and their share of HBM bandwidth */
  readonly elementwiseBytesPerToken: number;
  readonly elementwiseEfficiency: number;
  readonly matmulFlops: number;
  readonly matmulEfficiency: number;
  /** p of the p-norm joining the memory and compute bounds; 2 matches Vidur's knee at 128-512 tokens */
  readonly rooflineKneeExponent: number;
  readonly layers: number;
  readonly slidingWindowLayers: number;
  readonly slidingWindowTokens: number;
  /** per layer: 4 x query heads on this GPU x head dim (QK^T and PV, 2 FLOPs per multiply-add) */
  readonly attentionFlopsPerQueryKey: number;
  readonly attentionFlops: number;
  readonly attentionMatmulEfficiency: number;
  /** K and V of one token in one layer on this GPU */
  readonly kvBytesPerTokenLayer: number;
  readonly kvReadEfficiency: number;
  /**
   * per layer and decode key: tensor-core FLOPs of the decode kernel, whose query tile pads each GQA group
   * (standard kernel, or the split-KV kernel it runs below splitKvBelowSequences decoding sequences)
   */
  readonly decodeAttentionFlopsPerKey: { readonly standard: number; readonly splitKv: number };
  readonly splitKvBelowSequences: number;
  /** per layer and attention kernel (prefill, decode) that runs in the step */
  readonly attentionKernelS: number;
  readonly tensorParallel: number;
  /** activation bytes all-reduced per token, twice per layer when tensorParallel > 1 */
  readonly allReduceBytesPerToken: number;
  readonly allReduceBusBandwidthBps: number;
  readonly allReduceLatencyS: number;
}

/** Where a step's time goes; the sum is stepS. */
export interface StepBreakdown {
  overheadS: number;
  linearS: number;
  elementwiseS: number;
  lmHeadS: number;
  prefillAttentionS: number;
  decodeAttentionS: number;
  allReduceS: number;
}

function pNorm(a: number, b: number, p: number): number {
  return (a ** p + b ** p) ** (1 / p);
}

/** The spec folded into per-unit times, so a step costs a handful of multiplications. */
interface Coefficients {
  readonly overheadS: number;
  readonly weightS: number;
  readonly tokenComputeS: number;
  readonly lmHeadWeightS: number;
  readonly rowComputeS: number;
  readonly kneeExponent: number;
  readonly smallKernelsS: number;
  readonly elementwiseTokenS: number;
  readonly globalLayers: number;
  readonly slidingLayers: number;
  readonly windowTokens: number;
  readonly queryKeyLayerS: number;
  readonly kvTokenLayerS: number;
  /** per decode key and layer: the slower of reading its K and V and multiplying it against the padded tile */
  readonly decodeKeyLayerS: number;
  readonly splitKvDecodeKeyLayerS: number;
  readonly splitKvBelowSequences: number;
  readonly attentionKernelsS: number;
  readonly allReduceFixedS: number;
  readonly allReduceTokenS: number;
}

function coefficientsOf(spec: RooflineSpec): Coefficients {
  const weightBps = spec.hbmBandwidthBps * spec.weightReadEfficiency;
  const matmulFlops = spec.matmulFlops * spec.matmulEfficiency;
  const tp = spec.tensorParallel;
  const allReduces = tp > 1 ? 2 * spec.layers : 0;
  const attentionFlops = spec.attentionFlops * spec.attentionMatmulEfficiency;
  const kvTokenLayerS = spec.kvBytesPerTokenLayer / (spec.hbmBandwidthBps * spec.kvReadEfficiency);
  return {
    overheadS: spec.stepOverheadS,
    weightS: spec.linearWeightBytes / weightBps,
    tokenComputeS: spec.linearFlopsPerToken / matmulFlops,
    lmHeadWeightS: spec.lmHeadWeightBytes / weightBps,
    rowComputeS: spec.lmHeadFlopsPerRow / matmulFlops,
    kneeExponent: spec.rooflineKneeExponent,
    smallKernelsS: spec.layers * spec.layerKernelsS,
    elementwiseTokenS: spec.elementwiseBytesPerToken / (spec.hbmBandwidthBps * spec.elementwiseEfficiency),
    globalLayers: spec.layers - spec.slidingWindowLayers,
    slidingLayers: spec.slidingWindowLayers,
    windowTokens: spec.slidingWindowTokens,
    queryKeyLayerS: spec.attentionFlopsPerQueryKey / attentionFlops,
    kvTokenLayerS,
    decodeKeyLayerS: Math.max(kvTokenLayerS, spec.decodeAttentionFlopsPerKey.standard / attentionFlops),
    splitKvDecodeKeyLayerS: Math.max(kvTokenLayerS, spec.decodeAttentionFlopsPerKey.splitKv / attentionFlops),
    splitKvBelowSequences: spec.splitKvBelowSequences,
    attentionKernelsS: spec.layers * spec.attentionKernelS,
    allReduceFixedS: allReduces * spec.allReduceLatencyS,
    // ring all-reduce moves 2(tp-1)/tp of the buffer through each GPU's links
    allReduceTokenS:
      (allReduces * ((2 * (tp - 1)) / Math.max(tp, 1)) * spec.allReduceBytesPerToken) /
      spec.allReduceBusBandwidthBps,
  };
}

function linearLayersS(k: Coefficients, tokens: number): number {
  return tokens > 0 ? pNorm(k.weightS, tokens * k.tokenComputeS, k.kneeExponent) : 0;
}

/** The small kernels between the GEMMs: each costs a few microseconds however few tokens, then bandwidth. */
function elementwiseLayersS(k: Coefficients, tokens: number): number {
  return tokens > 0 ? pNorm(k.smallKernelsS, tokens * k.elementwiseTokenS, k.kneeExponent) : 0;
}

/** Keys one query attends to, summed over layers: sliding-window layers stop at their window. */
function keyLayers(k: Coefficients, keys: number): number {
  return k.globalLayers * keys + k.slidingLayers * Math.min(keys, k.windowTokens);
}

/**
 * Roofline step-time model: fixed overhead + linear layers (weights streamed once per step, joined
 * smoothly to the compute bound of the batched tokens) + the small kernels between them (a fixed time per
 * layer joined to the activation bytes they move) + LM head + attention (prefill by FLOPs; decode by the
 * slower of its KV bytes and its padded query tiles' FLOPs) + tensor-parallel all-reduces. O(chunks) per
 * step with no allocation.
 */
export class RooflineLatencyModel extends AccumulatingLatencyModel {
  readonly name: string;
  private readonly coefficients: Coefficients;

  constructor(readonly spec: RooflineSpec) {
    super();
    this.name = spec.name;
    this.coefficients = coefficientsOf(spec);
  }

  newAccumulator(): StepAccumulator {
    return new RooflineAccumulator(this.coefficients);
  }

  /** Same time as stepS, split by component (allocates; for reports and calibration, not the hot path). */
  breakdown(chunks: readonly StepChunk[]): StepBreakdown {
    const acc = new RooflineAccumulator(this.coefficients);
    acc.beginStep();
    for (const chunk of chunks) acc.addChunk(chunk.numTokens, chunk.contextTokens);
    acc.endStepS();
    return { ...acc.parts };
  }

  /**
   * Everything but attention and the LM head for `tokens` batched tokens (GEMMs and the small kernels
   * between them): what Vidur's per-operator profiles measure.
   */
  nonAttentionS(tokens: number): number {
    return linearLayersS(this.coefficients, tokens) + elementwiseLayersS(this.coefficients, tokens);
  }
}

class RooflineAccumulator implements StepAccumulator {
  private tokens = 0;
  private rows = 0;
  private prefillChunks = 0;
  private prefillQueryKeyLayers = 0;
  private prefillKvTokenLayers = 0;
  private decodeChunks = 0;
  private decodeKvTokenLayers = 0;
  readonly parts: StepBreakdown = {
    overheadS: 0,
    linearS: 0,
    elementwiseS: 0,
    lmHeadS: 0,
    prefillAttentionS: 0,
    decodeAttentionS: 0,
    allReduceS: 0,
  };

  constructor(private readonly k: Coefficients) {}

  beginStep(): void {
    this.tokens = 0;
    this.rows = 0;
    this.prefillChunks = 0;
    this.prefillQueryKeyLayers = 0;
    this.prefillKvTokenLayers = 0;
    this.decodeChunks = 0;
    this.decodeKvTokenLayers = 0;
  }

  addChunk(numTokens: number, contextTokens: number): void {
    if (numTokens <= 0) return;
    const k = this.k;
    this.tokens += numTokens;
    this.rows++;
    if (numTokens === 1) {
      this.decodeChunks++;
      this.decodeKvTokenLayers += keyLayers(k, contextTokens + 1);
    } else {
      this.prefillChunks++;
      // causal: new token i sees contextTokens + i keys, numTokens * (contextTokens + numTokens / 2) in all
      this.prefillQueryKeyLayers += numTokens * keyLayers(k, contextTokens + numTokens / 2);
      this.prefillKvTokenLayers += keyLayers(k, contextTokens + numTokens);
    }
  }

  endStepS(): number {
    if (this.rows === 0) return 0;
    const k = this.k;
    const p = this.parts;
    p.overheadS = k.overheadS;
    p.linearS = linearLayersS(k, this.tokens);
    p.elementwiseS = elementwiseLayersS(k, this.tokens);
    p.lmHeadS = pNorm(k.lmHeadWeightS, this.rows * k.rowComputeS, k.kneeExponent);
    p.prefillAttentionS =
      this.prefillChunks > 0
        ? k.attentionKernelsS +
          Math.max(this.prefillQueryKeyLayers * k.queryKeyLayerS, this.prefillKvTokenLayers * k.kvTokenLayerS)
        : 0;
    const decodeKeyLayerS =
      this.decodeChunks < k.splitKvBelowSequences ? k.splitKvDecodeKeyLayerS : k.decodeKeyLayerS;
    p.decodeAttentionS =
      this.decodeChunks > 0 ? k.attentionKernelsS + this.decodeKvTokenLayers * decodeKeyLayerS : 0;
    p.allReduceS = k.allReduceFixedS + this.tokens * k.allReduceTokenS;
    return (
      p.overheadS +
      p.linearS +
      p.elementwiseS +
      p.lmHeadS +
      p.prefillAttentionS +
      p.decodeAttentionS +
      p.allReduceS
    );
  }
}
