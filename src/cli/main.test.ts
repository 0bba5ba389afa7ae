import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { continuumProgram } from "./program.js";

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

  it("loads only the command it runs; help and an unknown command list every one, in order", async () => {
    const all = (await continuumProgram(["node", "continuum", "--help"])).commands.map((c) => c.name());
    assert.equal(all.length, 17);
    assert.deepEqual(all.slice(0, 3), ["serve", "cluster", "gateway"]);
    assert.deepEqual(
      (await continuumProgram(["node", "continuum", "simulat"])).commands.map((c) => c.name()),
      all,
    );
    for (const name of all) {
      const one = await continuumProgram(["node", "continuum", name, "--help"]);
      assert.deepEqual(
        one.commands.map((c) => c.name()),
        [name],
      );
    }
  });
});
