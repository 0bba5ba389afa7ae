import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, symlinkSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FileSink } from "./file-sink.js";
import { Recorder } from "./recorder.js";

describe("FileSink", () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "file-sink-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("only creates <path>.jsonl on close, complete, and removes the tmp file", async () => {
    const base = join(dir, "run");
    const recorder = new Recorder(new FileSink(base));
    for (let i = 0; i < 1000; i++) {
      recorder.record({ programId: `job_${i % 7}`, requestId: `r${i}`, timeS: i, kind: "arrival" });
    }
    assert.equal(existsSync(`${base}.jsonl`), false);
    assert.equal(existsSync(`${base}.jsonl.tmp`), true);

    await recorder.close();
    assert.equal(existsSync(`${base}.jsonl.tmp`), false);
    const lines = (await readFile(`${base}.jsonl`, "utf8")).split("\n");
    assert.equal(lines.pop(), "");
    assert.equal(lines.length, 1000);
    assert.equal(JSON.parse(lines[999]!).request, "r999");
  });

  it("a process that exits before close() leaves every line it wrote in the tmp file, never the final one", async () => {
    const base = join(dir, "exited");
    const sink = new URL("./file-sink.ts", import.meta.url).href;
    const script = `import { FileSink } from ${JSON.stringify(sink)};
      const s = new FileSink(${JSON.stringify(base)});
      for (let i = 0; i < 3; i++) s.write(JSON.stringify({ i }));
      process.exit(1);`;
    const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script]);
    assert.equal(child.status, 1, child.stderr.toString());
    assert.equal(await readFile(`${base}.jsonl.tmp`, "utf8"), '{"i":0}\n{"i":1}\n{"i":2}\n');
    assert.equal(existsSync(`${base}.jsonl`), false);
  });

  it("writes through to the tmp file once its buffer fills instead of holding the history", async () => {
    const sink = new FileSink(join(dir, "stream"), { bufferChars: 256 });
    for (let i = 0; i < 100; i++) sink.write(`{"i":${i}}`);
    assert.ok((await stat(sink.tmpPath)).size > 500);
    await sink.close();
    assert.equal((await readFile(sink.finalPath, "utf8")).split("\n").length, 101);
  });

  it("discards a tmp file left by a crashed run and creates missing directories", async () => {
    const base = join(dir, "nested", "deeper", "crashed");
    const first = new FileSink(base);
    await first.close();
    await writeFile(`${base}.jsonl.tmp`, "stale partial line");
    const sink = new FileSink(base);
    sink.write("fresh");
    await sink.close();
    assert.equal(await readFile(`${base}.jsonl`, "utf8"), "fresh\n");
  });

  it("survives a failing disk without throwing into record(), and never publishes the partial log", {
    skip: !existsSync("/dev/full"),
  }, async () => {
    const base = join(dir, "full");
    // Opening <base>.jsonl.tmp follows the link, so every write fails with ENOSPC.
    symlinkSync("/dev/full", `${base}.jsonl.tmp`);
    const recorder = new Recorder(new FileSink(base, { bufferChars: 64 }));
    for (let i = 0; i < 100; i++)
      recorder.record({ programId: "p", requestId: `r${i}`, timeS: i, kind: "arrival" });
    await assert.rejects(recorder.close(), /was not created/);
    assert.equal(existsSync(`${base}.jsonl`), false);
  });

  it("refuses writes after close", async () => {
    const sink = new FileSink(join(dir, "closed"));
    await sink.close();
    await sink.close();
    assert.throws(() => sink.write("late"), /closed/);
  });
});
