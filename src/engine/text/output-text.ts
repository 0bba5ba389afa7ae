/**
 * A request's generated text, built token by token from raw piece bytes: UTF-8 characters split across
 * tokens are held until complete, and text that could be the start of a stop string is held until it
 * is known not to be one. When a stop string appears, the text ends right before it.
 */
export class OutputText {
  private readonly decoder = new TextDecoder("utf-8");
  private readonly stops: readonly string[];
  private readonly longestStop: number;
  private full = "";
  private emitted = 0;
  private stopped = false;
  private matchedStop: string | null = null;
  /** where a stop string may begin: text out before min_tokens is not searched */
  private stopsFrom = 0;

  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
    this.longestStop = this.stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  /** The text so far (final once finished or stopped). */
  get text(): string {
    return this.full;
  }

  /** Text already handed out as deltas. */
  get emittedText(): string {
    return this.full.slice(0, this.emitted);
  }

  get hitStop(): boolean {
    return this.stopped;
  }

  /** The stop string that ended the text, or null (EOS, max tokens, or still going). */
  get stopString(): string | null {
    return this.matchedStop;
  }

  /**
   * Adds a token's bytes; returns the new text safe to stream and whether a stop string ended it.
   * `lookForStops` false (min_tokens not reached): the text so far is out of reach of stop strings.
   */
  push(bytes: Uint8Array, lookForStops = true): { delta: string; stopped: boolean } {
    if (this.stopped) return { delta: "", stopped: true };
    const before = this.full.length;
    this.full += this.decoder.decode(bytes, { stream: true });
    if (!lookForStops) {
      this.stopsFrom = this.full.length;
      return { delta: this.take(this.full.length), stopped: false };
    }
    if (this.longestStop > 0) {
      let cut = -1;
      const from = Math.max(this.stopsFrom, before - this.longestStop + 1);
      for (const stop of this.stops) {
        const at = this.full.indexOf(stop, from);
        if (at >= 0 && (cut < 0 || at < cut)) {
          cut = at;
          this.matchedStop = stop;
        }
      }
      if (cut >= 0) {
        this.full = this.full.slice(0, cut);
        this.stopped = true;
        return { delta: this.take(this.full.length), stopped: true };
      }
    }
    return { delta: this.take(this.full.length - this.heldBack()), stopped: false };
  }

  /** Generation ended (EOS, length): flushes held text and any incomplete character. */
  finish(): string {
    if (!this.stopped) this.full += this.decoder.decode();
    this.stopped = true;
    return this.take(this.full.length);
  }

  private take(upTo: number): string {
    if (upTo <= this.emitted) return "";
    const delta = this.full.slice(this.emitted, upTo);
    this.emitted = upTo;
    return delta;
  }

  /** Length of the longest suffix of the text that is a proper prefix of a stop string. */
  private heldBack(): number {
    const max = Math.min(this.longestStop - 1, this.full.length - this.emitted);
    for (let k = max; k > 0; k--) {
      const tail = this.full.slice(this.full.length - k);
      if (this.stops.some((s) => s.startsWith(tail))) return k;
    }
    return 0;
  }
}
