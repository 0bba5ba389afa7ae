/** Server-sent events read from a byte stream, frame by frame, and written back as they came. */
export interface SseFrame {
  /** the `event:` field; null when the frame has none (OpenAI's chunks) */
  readonly event: string | null;
  readonly data: string;
}

/** The frames of a text/event-stream body (comments and `id:`/`retry:` fields are not kept). */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event: string | null = null;
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline = buffer.search(/\r?\n/);
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(buffer[newline] === "\r" ? newline + 2 : newline + 1);
        if (line === "") {
          if (data.length > 0 || event !== null) yield { event, data: data.join("\n") };
          event = null;
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        } else if (line.startsWith("event:")) {
          event = line.slice(line[6] === " " ? 7 : 6);
        }
        newline = buffer.search(/\r?\n/);
      }
      if (done) break;
    }
    if (data.length > 0) yield { event, data: data.join("\n") };
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

export function writeSse(frame: SseFrame): string {
  const event = frame.event === null ? "" : `event: ${frame.event}\n`;
  return `${event}${frame.data
    .split("\n")
    .map((line) => `data: ${line}`)
    .join("\n")}\n\n`;
}
