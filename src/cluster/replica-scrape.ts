/**
 * One replica's answer to one GET (its /metrics, its /dashboard/state), as the fleet view asks for it on
 * every request: an answer within the caller's deadline is fresh; a replica that has not answered by then
 * (busy, or its host cut off) is shown with its last answer, marked stale with its age, until that answer
 * fails or grows too old, and then as down with the reason. A request to a replica runs on past the
 * caller's deadline up to its own timeout and later callers join it, so a dead host costs each caller its
 * deadline, never more, and is never asked twice at once.
 */

/** How a read ended: the value to show (null: none), how old it is, and why it is not fresh. */
export interface ScrapeRead<T> {
  readonly value: T | null;
  /** the value was answered within the deadline */
  readonly fresh: boolean;
  /** seconds since the value was answered (0 when fresh; null without a value) */
  readonly ageS: number | null;
  /** why there is no fresh value: the failure, or how long the caller waited */
  readonly error: string | null;
}

/** A stale answer older than this is not shown: the replica counts as down. */
export const STALE_LIMIT_MS = 30_000;

/** Why a request to a replica failed, in words (fetch says only "fetch failed"; its cause says why). */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  if (cause?.code === "ECONNREFUSED") return "connection refused";
  if (cause?.code === "ECONNRESET") return "connection reset";
  if (cause?.code === "EHOSTUNREACH" || cause?.code === "ENETUNREACH") return "host unreachable";
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError"))
    return "no answer (timed out)";
  const message = error instanceof Error ? error.message : String(error);
  return cause?.message ? `${message}: ${cause.message}` : message;
}

export class ReplicaScrape<T> {
  private pending: Promise<void> | null = null;
  private answered: { value: T; atMs: number } | null = null;
  /** the latest finished request's failure; null when it answered */
  private failure: string | null = null;

  /** `load` throws when the replica gave no usable answer (its message is the reason shown) */
  constructor(
    private readonly load: (signal: AbortSignal) => Promise<T>,
    private readonly timeoutMs: number,
  ) {}

  async read(deadlineMs: number): Promise<ScrapeRead<T>> {
    this.pending ??= this.request();
    let timer: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([
      this.pending.then(() => true),
      new Promise<boolean>((done) => {
        timer = setTimeout(() => done(false), deadlineMs);
      }),
    ]);
    clearTimeout(timer);
    const now = Date.now();
    if (this.failure !== null) return { value: null, fresh: false, ageS: null, error: this.failure };
    const last = this.answered;
    if (inTime && last) return { value: last.value, fresh: true, ageS: 0, error: null };
    const waited = `no answer within ${deadlineMs} ms`;
    if (!last || now - last.atMs > STALE_LIMIT_MS)
      return { value: null, fresh: false, ageS: null, error: waited };
    return { value: last.value, fresh: false, ageS: (now - last.atMs) / 1000, error: waited };
  }

  private async request(): Promise<void> {
    try {
      this.answered = { value: await this.load(AbortSignal.timeout(this.timeoutMs)), atMs: Date.now() };
      this.failure = null;
    } catch (error) {
      this.failure = reasonOf(error);
    } finally {
      this.pending = null;
    }
  }
}
