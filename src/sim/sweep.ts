import { availableParallelism } from "node:os";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { isTypeScriptPolicyModule, loadPolicyModules } from "../policies/index.js";
import { createSimPolicy } from "./clairvoyant.js";
import type { ClosedLoopResult } from "./closed-loop/closed-loop.js";
import { type ClosedLoopJob, runClosedLoopJob } from "./closed-loop/closed-loop-job.js";
import { type PointJob, runPointJob } from "./point-job.js";
import type { PointResult } from "./simulate.js";

const YOUNG_GENERATION_MB = 192;

export type SweepProgress = (done: number, total: number, last: PointResult) => void;

/** A point whose simulation threw (e.g. a trace prompt larger than the KV pool); the other points still run. */
export interface PointFailure<J = PointJob> {
  readonly index: number;
  readonly job: J;
  readonly error: string;
}

export interface SweepOutcome<R = PointResult, J = PointJob> {
  /** in job order; undefined where the point failed */
  readonly results: readonly (R | undefined)[];
  readonly failures: readonly PointFailure<J>[];
}

/** What a worker runs: an open-loop point, or a closed-loop run (the message says which). */
export type JobKind = "point" | "closed-loop";

/**
 * Runs every point, like runSweep, and a point that throws is reported beside the others' results. Policy
 * modules among the jobs' policies are loaded first (a bad one throws before any point runs); each worker
 * thread loads them again, for itself, before its first point of each.
 */
export function runSweepSettled(
  jobs: readonly PointJob[],
  options: { threads?: number; onProgress?: SweepProgress } = {},
): Promise<SweepOutcome> {
  return runJobsSettled("point", jobs, runPointJob, estimatedCost, options);
}

/** Closed-loop runs (one per policy and concurrency), on worker threads as runSweepSettled runs points. */
export function runClosedLoopSettled(
  jobs: readonly ClosedLoopJob[],
  options: {
    threads?: number;
    onProgress?: (done: number, total: number, last: ClosedLoopResult) => void;
  } = {},
): Promise<SweepOutcome<ClosedLoopResult, ClosedLoopJob>> {
  return runJobsSettled("closed-loop", jobs, runClosedLoopJob, (job) => job.concurrency, options);
}

async function runJobsSettled<J extends { readonly policy: string }, R>(
  kind: JobKind,
  jobs: readonly J[],
  run: (job: J) => R,
  estimate: (job: J) => number,
  options: { threads?: number; onProgress?: (done: number, total: number, last: R) => void },
): Promise<SweepOutcome<R, J>> {
  await loadPolicyModules(jobs.map((job) => job.policy));
  const threads = Math.max(1, Math.min(options.threads ?? availableParallelism(), jobs.length));
  const results = Array.from<R | undefined>({ length: jobs.length });
  const failures: PointFailure<J>[] = [];
  let done = 0;
  const report = (index: number, result: R) => {
    results[index] = result;
    done++;
    options.onProgress?.(done, jobs.length, result);
  };
  const fail = (index: number, error: string) => {
    failures.push({ index, job: jobs[index] as J, error });
  };
  if (threads === 1) {
    jobs.forEach((job, index) => {
      try {
        report(index, run(job));
      } catch (error) {
        fail(index, error instanceof Error ? (error.stack ?? error.message) : String(error));
      }
    });
    return { results, failures: sortedByIndex(failures) };
  }
  const here = fileURLToPath(import.meta.url);
  const workerUrl = new URL(`./sweep-worker${extname(here)}`, import.meta.url);
  const loader =
    extname(here) === ".ts"
      ? "tsx"
      : jobs.some((j) => isTypeScriptPolicyModule(j.policy))
        ? "tsx-if-any"
        : "none";
  // Heaviest points first (longest-processing-time order), so no worker is left with a long one at the end.
  const cost = jobs.map(estimate);
  const order = jobs.map((_, index) => index).sort((a, b) => cost[b]! - cost[a]!);
  let next = 0;
  await Promise.all(
    Array.from(
      { length: threads },
      () =>
        new Promise<void>((resolve, reject) => {
          const worker = startWorker(workerUrl, loader);
          const feed = () => {
            if (next >= jobs.length) {
              void worker.terminate().then(() => resolve());
              return;
            }
            const index = order[next++] as number;
            worker.postMessage({ index, kind, job: jobs[index] });
          };
          worker.on("message", (message: { index: number; result?: R; error?: string }) => {
            if (message.result) report(message.index, message.result);
            else fail(message.index, message.error ?? "unknown error");
            feed();
          });
          // A worker that dies (out of memory, a crash outside a point) takes the sweep down with it.
          worker.on("error", reject);
          feed();
        }),
    ),
  );
  return { results, failures: sortedByIndex(failures) };
}

/**
 * Runs independent simulation points on worker threads (one per core) and returns results in job order,
 * so the output does not depend on which worker finished first. Throws if any point fails.
 */
export async function runSweep(
  jobs: readonly PointJob[],
  options: { threads?: number; onProgress?: SweepProgress } = {},
): Promise<PointResult[]> {
  const { results, failures } = await runSweepSettled(jobs, options);
  const first = failures[0];
  if (first) throw new Error(`simulation point ${first.index} failed: ${first.error}`);
  return results as PointResult[];
}

function sortedByIndex<J>(failures: PointFailure<J>[]): PointFailure<J>[] {
  return failures.sort((a, b) => a.index - b.index);
}

/**
 * Running from TypeScript sources (tests, tsx), the worker registers tsx's loader before importing
 * ("tsx"). A TypeScript policy module the main thread could import (it ran under `node --import tsx`) needs
 * the loader in the workers too, which a worker does not inherit: they register tsx where it can be found
 * ("tsx-if-any"), else import the module without it and report why that failed.
 */
function startWorker(url: URL, loader: "none" | "tsx" | "tsx-if-any"): Worker {
  // A simulation keeps many small objects alive across steps; a young generation this size (V8's default
  // is a few MB) cuts scavenging and made points 10-30% faster.
  const resourceLimits = { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB };
  if (loader === "none") return new Worker(url, { resourceLimits });
  const start = `import(${JSON.stringify(url.href)})`;
  const bootstrap =
    loader === "tsx"
      ? `import("tsx/esm/api").then((tsx) => { tsx.register(); return ${start}; });`
      : `import("tsx/esm/api").then((tsx) => tsx.register(), () => {}).then(() => ${start});`;
  return new Worker(bootstrap, { eval: true, resourceLimits });
}

/**
 * Relative cost of a point, for ordering only: offload tiers roughly double a point's work, and heavier
 * loads keep more requests running per step.
 */
function estimatedCost(job: PointJob): number {
  const policy = createSimPolicy(job.policy, []);
  const offload = policy.needsOffload || job.engine.cpuOffloadGb > 0 || job.engine.diskOffloadGb > 0;
  return (offload ? 2 : 1) * (1 + job.jps);
}
