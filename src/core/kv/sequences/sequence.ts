import type { Pin } from "../../program.js";
import type { Request } from "../../request.js";
import { type TokenContent, TokenIdContent } from "../token-content.js";

/** Who holds a sequence: a running request, or a program's pin (a finished request's sequence). */
export type SequenceHolder =
  | { readonly kind: "request"; readonly request: Request }
  | { readonly kind: "pin"; readonly pin: Pin };

/**
 * One of the executor's sequences as the scheduler places KV in it: positions [0, length) of `content`.
 * Held by a running request or a pin, it is backed by the holder's pool blocks; held by nobody (cache, or a
 * sliding-window model's checkpoint) by the blocks its last holder freed, until the pool hands them out.
 */
export class Sequence {
  content: TokenContent | null = null;
  holder: SequenceHolder | null = null;
  /** a sliding-window model's copy of a prefix several programs share, ending exactly where it ends */
  checkpoint = false;
  /** the tokens a running request's chunk stops at so that the next plan copies them as a checkpoint */
  checkpointAt: number | null = null;
  /** the request (and program) whose sequence this is, for the event log */
  requestId = "";
  programId = "";
  lastUse = 0;
  private freeLength = 0;
  private freeBlocks: readonly number[] = [];

  constructor(readonly id: number) {}

  get length(): number {
    const holder = this.holder;
    if (holder === null) return this.freeLength;
    return holder.kind === "request" ? holder.request.numComputedTokens : holder.pin.tokens;
  }

  /** The pool blocks backing the positions, block i holding positions [i * blockSize, (i + 1) * blockSize). */
  get blocks(): readonly number[] {
    const holder = this.holder;
    if (holder === null) return this.freeBlocks;
    return holder.kind === "request" ? holder.request.blockIds : holder.pin.blockIds;
  }

  get running(): Request | null {
    return this.holder?.kind === "request" ? this.holder.request : null;
  }

  get pin(): Pin | null {
    return this.holder?.kind === "pin" ? this.holder.pin : null;
  }

  /** Held by nobody and holding KV: reusable cache (or a checkpoint). */
  get cached(): boolean {
    return this.holder === null && this.freeLength > 0;
  }

  get empty(): boolean {
    return this.holder === null && this.freeLength === 0;
  }

  /** Its holder let go: it keeps `length` positions backed by `blocks` (now free in the pool). */
  letGo(length: number, blocks: readonly number[]): void {
    this.holder = null;
    this.freeLength = length;
    this.freeBlocks = length > 0 ? blocks : [];
    if (length === 0) this.clear();
  }

  /** A sequence nobody holds is cut to `length` positions. */
  cut(length: number, blockSizeTokens: number): void {
    if (this.holder !== null) throw new Error(`sequence ${this.id} is held: it is not cut`);
    this.freeLength = Math.min(this.freeLength, length);
    this.freeBlocks = this.freeBlocks.slice(0, Math.ceil(this.freeLength / blockSizeTokens));
    if (this.freeLength === 0) this.clear();
  }

  private clear(): void {
    this.content = null;
    this.checkpoint = false;
    this.checkpointAt = null;
    this.freeBlocks = [];
  }
}

/**
 * How much of a sequence a request going on from it keeps: the blocks it matched, and past them the
 * sequence's positions while they hold the request's tokens (up to, not with, its last token, computed for
 * its logits). A sliding-window model's sequence is continued only whole; for every model this spares up
 * to a block of recompute per turn. Nothing past a match of no blocks: a match is what says the sequence's
 * tokens are this tenant's. Content without token ids (the simulator's) keeps the blocks.
 */
export function heldPast(
  previous: TokenContent | null,
  length: number,
  content: TokenContent,
  matched: number,
): number {
  if (matched === 0 || !(previous instanceof TokenIdContent) || !(content instanceof TokenIdContent))
    return matched;
  const end = Math.min(length, content.length - 1);
  let held = matched;
  while (held < end && previous.tokenAt(held) === content.tokenAt(held)) held++;
  return held;
}
