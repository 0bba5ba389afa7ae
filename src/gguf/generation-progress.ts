/**
 * What the user sees while a built-in model is generated: a progress bar on a terminal, else a line at
 * every quarter (so logs stay short), and the size formats of those messages.
 */
import { SingleBar } from "cli-progress";

/** Decimal units, as disk sizes are quoted: "8.5 GB". */
export function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

/** Parameter counts as model names quote them: "8.0B", "2.9M". */
export function formatParams(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  return `${(n / 1e3).toFixed(1)}K`;
}

export interface ByteProgress {
  update(bytesDone: number): void;
  stop(): void;
}

/** Progress of writing `total` bytes, shown on `stream` (default stderr). */
export function byteProgress(
  total: number,
  stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): ByteProgress {
  const startMs = performance.now();
  const rate = (done: number) =>
    `${formatBytes(done / Math.max((performance.now() - startMs) / 1000, 1e-3))}/s`;
  if (stream.isTTY) {
    const bar = new SingleBar({
      format: "  [{bar}] {percentage}% | {done} of {size} | {rate} | ETA {eta_formatted}",
      stream,
      hideCursor: true,
      etaBuffer: 50,
    });
    bar.start(total, 0, { done: formatBytes(0), size: formatBytes(total), rate: "" });
    return {
      update: (done) => bar.update(done, { done: formatBytes(done), rate: rate(done) }),
      stop: () => bar.stop(),
    };
  }
  let quartersShown = 0;
  return {
    update(done) {
      const quarters = Math.floor((4 * done) / total);
      if (quarters <= quartersShown) return;
      quartersShown = quarters;
      stream.write(`  ${25 * quarters}% (${formatBytes(done)} of ${formatBytes(total)}, ${rate(done)})\n`);
    },
    stop() {},
  };
}
