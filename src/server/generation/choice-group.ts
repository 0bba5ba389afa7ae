import { ChoiceTally } from "./choice-tally.js";
import type { Generation } from "./generation.js";

interface Started {
  readonly requestId: string;
  readonly generation: Generation;
}

/**
 * Starts `count` generations of one prompt (a request's `n` choices): the first until its first token when
 * others follow, so that the prompt's KV is computed once and there for them, then the others at once.
 * `start(i, awaitFirstToken, tally)` starts the i-th, all reporting their end to `tally`. If one cannot
 * start, those started end and its error is thrown.
 */
export async function startChoiceGroup<T extends Started>(
  count: number,
  start: (index: number, awaitFirstToken: boolean, tally: ChoiceTally) => Promise<T>,
): Promise<T[]> {
  const tally = new ChoiceTally(count);
  const first = await start(0, count > 1, tally);
  const rest = await Promise.allSettled(
    Array.from({ length: count - 1 }, (_, k) => start(k + 1, false, tally)),
  );
  const started = [first, ...rest.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []))];
  const failed = rest.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    for (const s of started) s.generation.abort();
    throw failed.reason;
  }
  return started;
}

/**
 * The request ids of one request's generations: a client's X-Request-Id (or a new id) names the first,
 * and the i-th is the first's with `-i` appended, as request ids must be unique.
 */
export class IndexedRequestIds {
  private first = "";

  /** The context the i-th generation starts with. */
  contextFor<T extends { readonly newRequestId: (...args: never[]) => string }>(ctx: T, i: number): T {
    return i === 0 ? ctx : { ...ctx, newRequestId: () => `${this.first}-${i}` };
  }

  /** The i-th generation started under `requestId`. */
  started(i: number, requestId: string): void {
    if (i === 0) this.first = requestId;
  }
}
