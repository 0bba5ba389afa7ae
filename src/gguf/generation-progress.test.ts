import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { byteProgress, formatBytes, formatParams } from "./generation-progress.js";

describe("generation progress", () => {
  it("formats sizes the way model cards quote them", () => {
    assert.equal(formatBytes(8_536_158_080), "8.5 GB");
    assert.equal(formatBytes(5_800_000), "5.8 MB");
    assert.equal(formatBytes(512), "512 B");
    assert.equal(formatParams(8_030_261_248), "8.0B");
    assert.equal(formatParams(2_900_000), "2.9M");
  });

  it("prints a line at each quarter when stderr is not a terminal", () => {
    const out = new PassThrough();
    const lines: string[] = [];
    out.on("data", (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean)));
    const progress = byteProgress(8e9, out);
    for (let done = 0; done <= 8e9; done += 0.5e9) progress.update(done);
    progress.stop();
    assert.deepEqual(
      lines.map((l) => l.replace(/, .*/, "")),
      [
        "  25% (2.0 GB of 8.0 GB",
        "  50% (4.0 GB of 8.0 GB",
        "  75% (6.0 GB of 8.0 GB",
        "  100% (8.0 GB of 8.0 GB",
      ],
    );
    assert.match(lines[0]!, /B\/s\)$/);
  });
});
