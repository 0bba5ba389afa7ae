/**
 * The answers the server gave on its API (`/v1/...`) since it started, by outcome: what the fleet
 * dashboard shows as each replica's errors. 429 (the server at capacity) is counted apart from the other
 * client errors.
 */
export interface AnswerCounts {
  readonly success: number;
  /** 4xx other than 429: requests the server refused as they were (bad field, unknown model, no key...) */
  readonly clientError: number;
  /** 429: refused for load */
  readonly rateLimited: number;
  /** 5xx: the server failed, or refused while shutting down or draining (503) */
  readonly serverError: number;
}

export class AnswerCounter {
  private readonly counts = { success: 0, clientError: 0, rateLimited: 0, serverError: 0 };

  /** An answer's HTTP status (a stream's is the one it started with). */
  observe(status: number): void {
    if (status === 429) this.counts.rateLimited++;
    else if (status >= 500) this.counts.serverError++;
    else if (status >= 400) this.counts.clientError++;
    else this.counts.success++;
  }

  snapshot(): AnswerCounts {
    return { ...this.counts };
  }
}
