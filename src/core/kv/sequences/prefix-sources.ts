import type { Request } from "../../request.js";
import { copiesTakeBlocks, type LlamaSeqKvSpec } from "../kv-spec.js";
import type { TokenContent } from "../token-content.js";
import { NO_MATCH, type PrefixMatch, type SequencePlan } from "./prefix-match.js";
import { heldPast, type Sequence } from "./sequence.js";
import type { SequenceIndex } from "./sequence-index.js";
import type { SequenceTiers } from "./sequence-tiers.js";

/** The resident sequence an admission's prefix comes from, and how much of it. */
interface ResidentSource {
  readonly source: Sequence | null;
  readonly tokens: number;
  readonly takeOver: boolean;
  /** a sliding-window model's longer prefix held where it cannot be given: its chunks stop there */
  readonly checkpointAt: number | null;
}

const NO_SOURCE: ResidentSource = { source: null, tokens: 0, takeOver: false, checkpointAt: null };

/**
 * Where an admission's known prefix can come from on a llama-seq executor: a resident sequence (taken over
 * or copied) or a saved state (restored), only where it can really be given (sequence-map.ts).
 */
export class PrefixSources {
  private readonly windowed: boolean;
  private readonly takesBlocks: boolean;

  constructor(
    private readonly spec: LlamaSeqKvSpec,
    private readonly seqs: readonly Sequence[],
    private readonly index: SequenceIndex,
    private readonly tiers: SequenceTiers | null,
    private readonly blockSizeTokens: number,
  ) {
    this.windowed = spec.slidingWindow > 0;
    this.takesBlocks = copiesTakeBlocks(spec);
  }

  /**
   * The longest known prefix of the request's sequence that a resident sequence or a saved state can
   * really give, leaving its last token to compute (its logits are needed).
   */
  find(request: Request): PrefixMatch {
    const b = this.blockSizeTokens;
    const maxBlocks = Math.floor((request.numTokens - 1) / b);
    if (maxBlocks <= 0) return NO_MATCH;
    const content = request.content;
    const resident = this.windowed
      ? this.windowedSource(request, content, maxBlocks)
      : this.residentSource(request, content, maxBlocks);
    const restore = this.tierSource(request, content, maxBlocks, resident);
    if (restore !== null) return restore;
    if (resident.source === null) {
      return resident.checkpointAt === null ? NO_MATCH : { ...NO_MATCH, checkpointAt: resident.checkpointAt };
    }
    const source = resident.source;
    const tokens = resident.tokens;
    const sequence: SequencePlan = { kind: resident.takeOver ? "take-over" : "copy", source };
    const copied = !resident.takeOver && this.takesBlocks;
    return {
      gpuBlockIds: copied ? [] : source.blocks.slice(0, Math.ceil(tokens / b)),
      gpuTokens: tokens,
      tierTokens: 0,
      tier: null,
      copied,
      sequence,
      ...(resident.checkpointAt === null ? {} : { checkpointAt: resident.checkpointAt }),
    };
  }

  /** Whether the request may go on in this sequence itself: nobody holds it, or its own program's pin. */
  private takeable(seq: Sequence, request: Request): boolean {
    if (seq.checkpoint) return false;
    if (seq.holder === null) return true;
    return seq.pin?.programId === request.programId;
  }

  /**
   * The sequence holding the most leading blocks of the request (a cache one before a held one, then the most
   * recently used); taken over where the request covers it to within a block (or no sequence is empty),
   * else copied.
   */
  private residentSource(request: Request, content: TokenContent, maxBlocks: number): ResidentSource {
    let holders: readonly Sequence[] = [];
    const depth = this.index.walk(content, maxBlocks, (_, found) => {
      holders = found;
    });
    if (depth === 0) return NO_SOURCE;
    let best: Sequence | null = null;
    for (const seq of holders) {
      const better =
        best === null ||
        (this.takeable(seq, request) === this.takeable(best, request)
          ? seq.lastUse > best.lastUse
          : this.takeable(seq, request));
      if (better) best = seq;
    }
    const source = best as Sequence;
    const tokens = depth * this.blockSizeTokens;
    if (
      this.takeable(source, request) &&
      (source.length - tokens < this.blockSizeTokens || !this.seqs.some((s) => s.empty))
    ) {
      const held = heldPast(source.content, source.length, content, tokens);
      return { source, tokens: held, takeOver: true, checkpointAt: null };
    }
    return { source, tokens, takeOver: false, checkpointAt: null };
  }

  /**
   * A sliding-window model's source: a sequence the request continues whole (taken over), or one ending
   * exactly where a prefix of the request ends (copied; a checkpoint is one). Where a longer prefix is held
   * by a sequence that cannot give it, the request's chunks stop at its end, and the next plan keeps it
   * as a checkpoint.
   */
  private windowedSource(request: Request, content: TokenContent, maxBlocks: number): ResidentSource {
    const b = this.blockSizeTokens;
    let best: ResidentSource = NO_SOURCE;
    let deepest: readonly Sequence[] = [];
    const depth = this.index.walk(content, maxBlocks, (d, holders) => {
      deepest = holders;
      const end = d * b;
      for (const seq of holders) {
        if (this.takeable(seq, request) && Math.floor(seq.length / b) === d) {
          const held = heldPast(seq.content, seq.length, content, end);
          const better = held > best.tokens || (held === best.tokens && !best.takeOver);
          if (held === seq.length && better)
            best = { source: seq, tokens: held, takeOver: true, checkpointAt: null };
        } else if (seq.length === end && end > best.tokens) {
          best = { source: seq, tokens: end, takeOver: false, checkpointAt: null };
        }
      }
    });
    const prefix = depth * b;
    const kept = deepest.some((s) => s.checkpoint && s.length === prefix);
    const checkpointAt = depth > 0 && best.tokens < prefix && !kept ? prefix : null;
    return { ...best, checkpointAt };
  }

  /**
   * A saved state giving more than the resident source: restored whole (a sliding-window model's only when
   * the request continues it whole), with the resident prefix shared from its sequence in one unified pool.
   */
  private tierSource(
    request: Request,
    content: TokenContent,
    maxBlocks: number,
    resident: ResidentSource,
  ): PrefixMatch | null {
    const tiers = this.tiers;
    if (tiers === null) return null;
    const found = tiers.best(content, request.numTokens, maxBlocks);
    if (found === null) return null;
    const entry = found.entry;
    const b = this.blockSizeTokens;
    const held = heldPast(entry.content, entry.length, content, found.blocks * b);
    if (held <= resident.tokens || (this.windowed && held !== entry.length)) return null;
    const source = resident.source;
    // in one unified pool the whole state lands before it is cut, beside the sequence it shares from: one
    // that could never fit is not offered (the request computes what the resident sequence does not give)
    if (this.spec.layout === "unified" && entry.length > this.spec.cells - (source?.length ?? 0)) return null;
    const shares = !this.windowed && source !== null;
    const sharedTokens = shares
      ? Math.min(resident.takeOver ? Math.floor(resident.tokens / b) * b : resident.tokens, held)
      : 0;
    return {
      gpuBlockIds: shares ? (source as Sequence).blocks.slice(0, sharedTokens / b) : [],
      gpuTokens: sharedTokens,
      tierTokens: held - sharedTokens,
      tier: entry.tier,
      sequence: {
        kind: "restore",
        entry,
        shareFrom: shares && this.spec.layout === "unified" && sharedTokens > 0 ? source : null,
      },
    };
  }
}
