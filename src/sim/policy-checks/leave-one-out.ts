/**
 * Leave-one-workload-out: a policy variant chosen on every workload family but one, judged on the one left
 * out. A choice that holds only on the families it was chosen on is tuned to them; the held-out column says
 * what the choice is worth on traffic it never saw.
 */

/** One capacity run: a family under one memory setting (no tier, a RAM tier). */
export interface CaseResult {
  readonly family: string;
  readonly setting: string;
  /** sustainable load per policy (median over seeds) */
  readonly sustainable: Readonly<Record<string, number>>;
  /** the KV-limited ceiling of the run */
  readonly kvBoundJps: number;
}

/** The bar: 1.05x the best peer wherever some policy carries under 0.8 x the KV-limited ceiling, else 1.0x. */
export const LEAD_WHERE_MEMORY_BINDS = 1.05;
export const MEMORY_BINDS_BELOW = 0.8;

function sustainableOf(c: CaseResult, policy: string): number {
  const jps = c.sustainable[policy];
  if (jps === undefined) throw new Error(`${c.family} (${c.setting}): no result for ${policy}`);
  return jps;
}

/** The best peer of a case and a policy's sustainable load over it. */
export function ratioToBestPeer(c: CaseResult, policy: string, peers: readonly string[]): number {
  const best = Math.max(...peers.map((p) => sustainableOf(c, p)));
  return sustainableOf(c, policy) / best;
}

/** The ratio a case asks for: 1.05 where some policy is under 0.8 of the KV-limited ceiling, else 1.0. */
export function targetRatio(c: CaseResult): number {
  const lowest = Math.min(...Object.values(c.sustainable));
  return lowest < MEMORY_BINDS_BELOW * c.kvBoundJps ? LEAD_WHERE_MEMORY_BINDS : 1;
}

function geometricMean(xs: readonly number[]): number {
  return Math.exp(xs.reduce((sum, x) => sum + Math.log(x), 0) / xs.length);
}

/**
 * The candidate these cases would choose: the highest worst ratio to the best peer (the bar is per case,
 * so the worst case decides), ties by the geometric mean of the ratios, then by the candidates' order.
 */
export function chooseCandidate(
  cases: readonly CaseResult[],
  candidates: readonly string[],
  peers: readonly string[],
): string {
  if (candidates.length === 0) throw new Error("no candidates to choose from");
  if (cases.length === 0) return candidates[0] as string;
  let chosen = candidates[0] as string;
  let best: [number, number] = [Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY];
  for (const candidate of candidates) {
    const ratios = cases.map((c) => ratioToBestPeer(c, candidate, peers));
    const score: [number, number] = [Math.min(...ratios), geometricMean(ratios)];
    if (score[0] > best[0] || (score[0] === best[0] && score[1] > best[1])) {
      chosen = candidate;
      best = score;
    }
  }
  return chosen;
}

export interface HeldOutRow {
  readonly family: string;
  readonly setting: string;
  /** chosen on every other family's cases */
  readonly chosen: string;
  /** the chosen candidate's ratio to the best peer here */
  readonly ratio: number;
  readonly target: number;
  /** each candidate's ratio here (in-sample, for contrast) */
  readonly ratios: Readonly<Record<string, number>>;
  /** the best peer here and its sustainable load */
  readonly bestPeer: string;
  readonly bestPeerJps: number;
}

/** For each family, the candidate chosen without its cases, and how it does on each of them. */
export function leaveOneOut(
  cases: readonly CaseResult[],
  candidates: readonly string[],
  peers: readonly string[],
): HeldOutRow[] {
  const families = [...new Set(cases.map((c) => c.family))];
  return families.flatMap((family) => {
    const chosen = chooseCandidate(
      cases.filter((c) => c.family !== family),
      candidates,
      peers,
    );
    return cases
      .filter((c) => c.family === family)
      .map((c) => {
        const bestPeer = peers.reduce((a, b) => (sustainableOf(c, b) > sustainableOf(c, a) ? b : a));
        return {
          family,
          setting: c.setting,
          chosen,
          ratio: ratioToBestPeer(c, chosen, peers),
          target: targetRatio(c),
          ratios: Object.fromEntries(candidates.map((p) => [p, ratioToBestPeer(c, p, peers)])),
          bestPeer,
          bestPeerJps: sustainableOf(c, bestPeer),
        };
      });
  });
}
