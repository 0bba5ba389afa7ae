/**
 * Sequential file output through two staging buffers: the caller fills regions of one buffer in place
 * while the other is being written, so producing the data and writing it overlap and every write is
 * large. Memory stays at the two buffers whatever the file size.
 */
import { type FileHandle, open } from "node:fs/promises";

const DEFAULT_BUFFER_BYTES = 8 << 20;

export interface StagedFileOptions {
  /** Bytes per staging buffer (also the largest region); default 8 MiB. */
  bufferBytes?: number;
  /** Called with the bytes on disk so far after each completed write. */
  onWritten?: (bytes: number) => void;
}

export class StagedFileWriter {
  private readonly buffers: [Buffer, Buffer];
  private active: 0 | 1 = 0;
  private used = 0;
  private inFlight: Promise<void> = Promise.resolve();
  private filePosition = 0;
  private onDisk = 0;

  private constructor(
    private readonly fh: FileHandle,
    bufferBytes: number,
    private readonly onWritten: ((bytes: number) => void) | undefined,
  ) {
    this.buffers = [Buffer.allocUnsafe(bufferBytes), Buffer.allocUnsafe(bufferBytes)];
  }

  /** Creates (or truncates) `path`. */
  static async open(path: string, opts: StagedFileOptions = {}): Promise<StagedFileWriter> {
    const fh = await open(path, "w");
    return new StagedFileWriter(fh, opts.bufferBytes ?? DEFAULT_BUFFER_BYTES, opts.onWritten);
  }

  /** Bytes handed over so far: the file offset of the next region. */
  get position(): number {
    return this.filePosition + this.used;
  }

  /**
   * The next `n` bytes of the file (at most one buffer), to be filled completely before the next
   * call: the buffer is reused, so whatever is not overwritten is stale data.
   */
  async region(n: number): Promise<Buffer> {
    const buffer = this.buffers[this.active];
    if (n > buffer.length) throw new Error(`region of ${n} bytes exceeds the ${buffer.length}-byte buffer`);
    if (this.used + n > buffer.length) await this.flush();
    const out = this.buffers[this.active].subarray(this.used, this.used + n);
    this.used += n;
    return out;
  }

  /** Appends a copy of `bytes`, which may be longer than a buffer. */
  async append(bytes: Uint8Array): Promise<void> {
    const size = this.buffers[0].length;
    for (let done = 0; done < bytes.length; ) {
      const n = Math.min(size, bytes.length - done);
      (await this.region(n)).set(bytes.subarray(done, done + n));
      done += n;
    }
  }

  /** Writes out everything handed over and closes the file. */
  async close(): Promise<void> {
    try {
      await this.flush();
      await this.inFlight;
    } finally {
      await this.fh.close();
    }
  }

  /** Closes the file after a failure, without writing what is still staged. */
  async abandon(): Promise<void> {
    await this.inFlight.catch(() => undefined);
    await this.fh.close();
  }

  /** Starts writing the active buffer (after the previous write has finished) and switches buffers. */
  private async flush(): Promise<void> {
    await this.inFlight;
    if (this.used === 0) return;
    const data = this.buffers[this.active].subarray(0, this.used);
    this.inFlight = this.writeAll(data, this.filePosition);
    // a failed write surfaces at the next flush or close; until then it is not an unhandled rejection
    this.inFlight.catch(() => undefined);
    this.filePosition += this.used;
    this.active = this.active === 0 ? 1 : 0;
    this.used = 0;
  }

  private async writeAll(data: Buffer, position: number): Promise<void> {
    for (let done = 0; done < data.length; ) {
      const { bytesWritten } = await this.fh.write(data, done, data.length - done, position + done);
      done += bytesWritten;
    }
    this.onDisk += data.length;
    this.onWritten?.(this.onDisk);
  }
}
