import { parentPort } from "node:worker_threads";
import { type PointJob, runPointJob } from "./point-job.js";

parentPort?.on("message", (message: { index: number; job: PointJob }) => {
  try {
    parentPort?.postMessage({ index: message.index, result: runPointJob(message.job) });
  } catch (error) {
    parentPort?.postMessage({
      index: message.index,
      error: error instanceof Error ? error.stack : String(error),
    });
  }
});
