import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { describe, it } from "node:test";
import { assertDiskSpace, freeDiskBytes } from "./disk-space.js";

describe("disk space check", () => {
  it("passes when there is room and otherwise says how much is needed and where", async () => {
    assert.ok((await freeDiskBytes(tmpdir())) > 0);
    await assertDiskSpace(tmpdir(), 1, "a test file");
    await assert.rejects(
      assertDiskSpace(tmpdir(), 1e15, "built-in model llama-3.1-8b-f16"),
      (err: Error) =>
        /^not enough disk space for built-in model llama-3\.1-8b-f16: it needs 1000000\.0 GB, but .+ has .+ free/.test(
          err.message,
        ) && err.message.includes("CONTINUUM_CACHE_DIR"),
    );
  });
});
