import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { writeFileAtomically } from "./atomic-file.js";
import { exportForkFormat } from "./export-fork-format.js";
import { MemorySink, Recorder } from "./recorder.js";

describe("exportForkFormat", () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "fork-export-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("writes the fork's scheduler_timestamps shape, shifted to epoch time", async () => {
    const sink = new MemorySink();
    const recorder = new Recorder(sink);
    const at = (programId: string, timeS: number) => ({ programId, requestId: "r1", timeS });
    recorder.record({ ...at("job_1", 0), kind: "arrival" });
    recorder.record({ ...at("job_2", 0.25), kind: "arrival" });
    recorder.record({ ...at("job_1", 0.5), kind: "waiting_to_running", promptTokens: 4096, hitTokens: 3800 });
    recorder.record({ ...at("job_1", 1), kind: "preempted" });
    recorder.record({ ...at("job_1", 1.5), kind: "evicted_to_running", promptTokens: 4096, hitTokens: 0 });
    recorder.record({ ...at("job_1", 2), kind: "departure", outputTokens: 10 });
    recorder.record({ ...at("job_1", 2), kind: "pinned", ttlS: 2 });
    recorder.record({ ...at("job_1", 3), kind: "offloaded", tokens: 4106, tier: "cpu" });
    recorder.record({ ...at("job_1", 4), kind: "unpinned", reason: "expired" });
    recorder.record({ ...at("job_1", 4), kind: "evicted", tokens: 4106 });
    recorder.record({ ...at("job_2", 5), kind: "aborted" });
    const jsonl = join(dir, "events.jsonl");
    await writeFile(jsonl, sink.toJsonl());

    const out = join(dir, "scheduler_timestamps");
    await exportForkFormat(jsonl, out, { epochOffsetS: 1000 });

    assert.deepEqual(JSON.parse(await readFile(out, "utf8")), {
      job_1: [
        { Request_arrival_time: 1000 },
        { waiting_to_running: 1000.5, prompt_length: 4096, hit_length: 3800 },
        { Request_evicted_from_running_queue_time: 1001 },
        { evicted_to_running: 1001.5, prompt_length: 4096, hit_length: 0 },
        { Request_departure_time: 1002 },
        { pinned_time: 1002 },
        { unpinned_time: 1004 },
      ],
      job_2: [{ Request_arrival_time: 1000.25 }],
    });
    assert.deepEqual((await readdir(dir)).sort(), ["events.jsonl", "scheduler_timestamps"]);
  });

  it("writes a valid empty object for an empty log", async () => {
    const jsonl = join(dir, "empty.jsonl");
    await writeFile(jsonl, "");
    const out = join(dir, "empty.json");
    await exportForkFormat(jsonl, out, { epochOffsetS: 0 });
    assert.deepEqual(JSON.parse(await readFile(out, "utf8")), {});
  });

  it("leaves an earlier export untouched when the log is corrupt", async () => {
    const jsonl = join(dir, "corrupt.jsonl");
    await writeFile(jsonl, '{"t":0,"program":"a","request":"r","event":"arrival"}\n{"t":1,"program":"a"\n');
    const out = join(dir, "kept.json");
    await writeFile(out, '{"job_old":[]}');
    await assert.rejects(exportForkFormat(jsonl, out, { epochOffsetS: 0 }), /corrupt\.jsonl:2/);
    assert.equal(await readFile(out, "utf8"), '{"job_old":[]}');
  });
});

describe("writeFileAtomically", () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "atomic-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("never exposes a partial final file and cleans up its tmp file on failure", async () => {
    const out = join(dir, "out.json");
    await assert.rejects(
      writeFileAtomically(out, async (write) => {
        await write('{"half":');
        assert.equal(existsSync(out), false);
        throw new Error("producer died");
      }),
      /producer died/,
    );
    assert.deepEqual(await readdir(dir), []);
  });

  it("publishes the complete content once the producer finishes", async () => {
    const out = join(dir, "done.json");
    await writeFileAtomically(out, async (write) => {
      await write("[1,");
      await write("2]");
      assert.equal(existsSync(out), false);
    });
    assert.equal(await readFile(out, "utf8"), "[1,2]");
    assert.deepEqual(await readdir(dir), ["done.json"]);
  });
});
