import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));

describe("continuum", () => {
  it("exits quietly when the reader of its output has gone (`continuum policies | head -1`)", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", main, "policies"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.equal(stderr, "");
    assert.equal(code, 0);
  });
});
