import { close as closeFd, closeSync, fsync, mkdirSync, openSync, writeSync } from "node:fs";
import { rename } from "node:fs/promises";
import { dirname } from "node:path";
import { promisify } from "node:util";
import { fsyncDirectory } from "./atomic-file.js";
import type { RecorderSink } from "./recorder.js";

const fsyncAsync = promisify(fsync);
const closeAsync = promisify(closeFd);

export interface FileSinkOptions {
  /** Characters buffered before a write to the file. */
  bufferChars?: number;
}

/**
 * Streams JSONL to `<path>.jsonl.tmp`; close() flushes, fsyncs and renames it to `<path>.jsonl`,
 * so the final file only ever exists complete.
 *
 * Writes are synchronous and chunked rather than going through a fs.WriteStream: record() cannot wait
 * for drain, so a WriteStream fed from a tight simulator loop would queue the whole history in memory.
 * Here memory is bounded by bufferChars no matter how long the run is.
 *
 * A failed write (disk full, I/O error) does not throw into the scheduler that called record(): the
 * sink stops writing, and close() rejects and leaves the final path absent, since the log is incomplete.
 *
 * A process that exits before close() (a server told twice to stop) still writes its buffered lines to
 * the tmp file, which then holds every event up to the exit: incomplete, so it keeps the tmp name.
 */
export class FileSink implements RecorderSink {
  readonly tmpPath: string;
  readonly finalPath: string;
  private readonly bufferChars: number;
  private fd: number | undefined;
  private pending: string[] = [];
  private pendingChars = 0;
  private closing: Promise<void> | undefined;
  private failure: unknown;
  private readonly flushOnExit = () => {
    if (this.fd === undefined || this.failure !== undefined) return;
    try {
      this.flush(this.fd);
    } catch {
      // exiting: nothing is left to tell
    }
  };

  constructor(path: string, options: FileSinkOptions = {}) {
    this.tmpPath = `${path}.jsonl.tmp`;
    this.finalPath = `${path}.jsonl`;
    this.bufferChars = options.bufferChars ?? 64 * 1024;
    mkdirSync(dirname(this.tmpPath), { recursive: true });
    // "w": a tmp file left by a crashed run is discarded, never appended to.
    this.fd = openSync(this.tmpPath, "w");
    process.once("exit", this.flushOnExit);
  }

  write(line: string): void {
    if (this.fd === undefined || this.closing) throw new Error(`FileSink ${this.finalPath} is closed`);
    if (this.failure !== undefined) return;
    this.pending.push(line, "\n");
    this.pendingChars += line.length + 1;
    if (this.pendingChars < this.bufferChars) return;
    try {
      this.flush(this.fd);
    } catch (error) {
      this.failure = error;
      this.pending = [];
    }
  }

  /** Idempotent: later calls return the first close's promise. */
  close(): Promise<void> {
    this.closing ??= this.finish();
    return this.closing;
  }

  private async finish(): Promise<void> {
    process.off("exit", this.flushOnExit);
    const fd = this.fd;
    if (fd === undefined) return;
    this.fd = undefined;
    try {
      if (this.failure !== undefined) throw this.failure;
      this.flush(fd);
      await fsyncAsync(fd);
    } catch (error) {
      closeSync(fd);
      throw new Error(`FileSink could not write ${this.tmpPath}; ${this.finalPath} was not created`, {
        cause: error,
      });
    }
    await closeAsync(fd);
    await rename(this.tmpPath, this.finalPath);
    await fsyncDirectory(dirname(this.finalPath));
  }

  private flush(fd: number): void {
    if (this.pending.length === 0) return;
    const bytes = Buffer.from(this.pending.join(""), "utf8");
    this.pending = [];
    this.pendingChars = 0;
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(fd, bytes, offset);
  }
}
