import { eventToLine, type RecorderEvent } from "./events.js";

/** Destination for the event log. `line` is one JSON object without a trailing newline. */
export interface RecorderSink {
  write(line: string): void;
  close(): Promise<void>;
}

/** What callers hold: a Recorder when recording is on, a NullRecorder when it is off. */
export interface EventRecorder {
  record(event: RecorderEvent): void;
  close(): Promise<void>;
}

/** Streams every event to its sink as one JSONL line. */
export class Recorder implements EventRecorder {
  private closing: Promise<void> | undefined;

  constructor(private readonly sink: RecorderSink) {}

  record(event: RecorderEvent): void {
    if (this.closing) throw new Error(`Recorder is closed; dropped ${event.kind} for ${event.programId}`);
    // NaN/Infinity would serialise as null and silently corrupt every later analysis.
    if (!Number.isFinite(event.timeS))
      throw new Error(`Recorder event ${event.kind} has timeS ${event.timeS}`);
    this.sink.write(eventToLine(event));
  }

  /** Idempotent: later calls return the first close's promise. */
  close(): Promise<void> {
    this.closing ??= this.sink.close();
    return this.closing;
  }
}

export class NullRecorder implements EventRecorder {
  record(_event: RecorderEvent): void {}

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Keeps every line in memory; for tests and short simulations. */
export class MemorySink implements RecorderSink {
  readonly lines: string[] = [];
  closed = false;

  write(line: string): void {
    if (this.closed) throw new Error("MemorySink is closed");
    this.lines.push(line);
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  /** The log as JSONL file content. */
  toJsonl(): string {
    return this.lines.map((line) => line + "\n").join("");
  }
}
