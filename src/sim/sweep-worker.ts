import { parentPort } from "node:worker_threads";
import { loadPolicyModules } from "../policies/index.js";
import { type ClosedLoopJob, runClosedLoopJob } from "./closed-loop/closed-loop-job.js";
import { type PointJob, runPointJob } from "./point-job.js";
import type { JobKind } from "./sweep.js";

// A worker has its own module registry: it imports a job's policy module (a spec resolved against the
// process's working directory, as the main thread did) before running the job. The sweep feeds a worker
// one job at a time, so the points still run one after another.
parentPort?.on(
  "message",
  async (message: { index: number; kind: JobKind; job: PointJob | ClosedLoopJob }) => {
    try {
      await loadPolicyModules([message.job.policy]);
      const result =
        message.kind === "closed-loop"
          ? runClosedLoopJob(message.job as ClosedLoopJob)
          : runPointJob(message.job as PointJob);
      parentPort?.postMessage({ index: message.index, result });
    } catch (error) {
      parentPort?.postMessage({
        index: message.index,
        error: error instanceof Error ? error.stack : String(error),
      });
    }
  },
);
