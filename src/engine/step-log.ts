/**
 * One line per engine step, for measuring the engine against the simulator's price of the same work
 * (`continuum analyze-steps`). Written as JSON lines; a run of thousands of steps is a few hundred KB.
 */
import { createWriteStream, type WriteStream } from "node:fs";

export interface EngineStepRecord {
  /** engine time at the step's start, seconds */
  readonly t: number;
  /** wall time of the whole step (KV mapping, tier I/O, batch, sampling bookkeeping) */
  readonly wallS: number;
  /** time inside the model (native decode + sampling) */
  readonly computeS: number;
  /** of computeS, the host's sampling after the decode (absent from older logs: read as 0) */
  readonly sampleS?: number;
  /** the plan's chunks as the scheduler (and the simulator) see them: [tokens, context] */
  readonly planned: readonly (readonly [number, number])[];
  /** the rows the engine ran per sequence: [rows, context]; the planned ones, less a chunk whose saved state could not be read */
  readonly ran: readonly (readonly [number, number])[];
  /** admitted prefix tokens restored from the RAM/disk tier in this step */
  readonly restoredTokens: number;
}

export type StepLogger = (record: EngineStepRecord) => void;

export interface StepLogFile {
  readonly log: StepLogger;
  close(): Promise<void>;
}

export function stepLogFile(path: string): StepLogFile {
  const stream: WriteStream = createWriteStream(path, { flags: "w" });
  return {
    log: (record) => {
      stream.write(`${JSON.stringify(record)}\n`);
    },
    close: () =>
      new Promise((resolve, reject) =>
        stream.end((error?: Error | null) => (error ? reject(error) : resolve())),
      ),
  };
}
