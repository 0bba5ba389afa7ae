import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { eventFromLine } from "./events.js";
import { MemorySink, NullRecorder, Recorder, type RecorderSink } from "./recorder.js";

describe("Recorder", () => {
  it("streams each event to the sink as one line, in order", () => {
    const sink = new MemorySink();
    const recorder = new Recorder(sink);
    recorder.record({ programId: "job_1", requestId: "r1", timeS: 0, kind: "arrival" });
    recorder.record({ programId: "job_1", requestId: "r1", timeS: 1.5, kind: "departure", outputTokens: 7 });
    assert.equal(sink.lines.length, 2);
    assert.deepEqual(eventFromLine(sink.lines[1]!), {
      programId: "job_1",
      requestId: "r1",
      timeS: 1.5,
      kind: "departure",
      outputTokens: 7,
    });
    assert.equal(sink.toJsonl(), `${sink.lines[0]}\n${sink.lines[1]}\n`);
  });

  it("closes the sink exactly once and refuses events afterwards", async () => {
    let closes = 0;
    const sink: RecorderSink = {
      write: () => {},
      close: async () => {
        closes++;
      },
    };
    const recorder = new Recorder(sink);
    await Promise.all([recorder.close(), recorder.close()]);
    assert.equal(closes, 1);
    assert.throws(
      () => recorder.record({ programId: "job_1", requestId: "r1", timeS: 2, kind: "aborted" }),
      /closed/,
    );
  });

  it("rejects a non-finite time instead of writing null into the log", () => {
    const sink = new MemorySink();
    const recorder = new Recorder(sink);
    assert.throws(() =>
      recorder.record({ programId: "p", requestId: "r", timeS: Number.NaN, kind: "arrival" }),
    );
    assert.equal(sink.lines.length, 0);
  });
});

describe("NullRecorder", () => {
  it("accepts events and closes without doing anything", async () => {
    const recorder = new NullRecorder();
    recorder.record({ programId: "p", requestId: "r", timeS: 0, kind: "arrival" });
    await recorder.close();
    recorder.record({ programId: "p", requestId: "r", timeS: 1, kind: "aborted" });
  });
});
