/** Live progress of a replay on stderr: redrawn in place on a TTY, plain lines otherwise. */
import type { ReplayProgress } from "./replay/replay-runner.js";

export function formatProgress(p: ReplayProgress): string {
  const stopped = p.sendingStopped && p.started < p.scheduled ? " (sending stopped)" : "";
  return (
    `bench ${p.elapsedS.toFixed(0).padStart(4)} s  programs ${p.completed}/${p.scheduled} done, ` +
    `${p.inFlight} in flight, ${p.started} started${stopped}, ${p.failed} failed, ${p.abandoned} abandoned  ` +
    `requests ${p.requests}, errors ${p.errors}`
  );
}

export interface ProgressPrinter {
  update(progress: ReplayProgress): void;
  /** ends the in-place line on a TTY */
  finish(): void;
}

/**
 * On a TTY each update redraws one line; otherwise an update prints a line when the counts changed
 * (or every 10 s), so logs stay short.
 */
export function progressPrinter(stream: NodeJS.WriteStream = process.stderr): ProgressPrinter {
  const tty = stream.isTTY === true;
  let lastKey = "";
  let lastPrintS = Number.NEGATIVE_INFINITY;
  let drawn = false;
  return {
    update(p) {
      const line = formatProgress(p);
      if (tty) {
        stream.write(`\r\x1b[K${line}`);
        drawn = true;
        return;
      }
      const key = `${p.completed}/${p.started}/${p.inFlight}/${p.failed}/${p.abandoned}/${p.requests}/${p.errors}`;
      if (key === lastKey && p.elapsedS - lastPrintS < 10) return;
      lastKey = key;
      lastPrintS = p.elapsedS;
      stream.write(`${line}\n`);
    },
    finish() {
      if (tty && drawn) stream.write("\n");
    },
  };
}
