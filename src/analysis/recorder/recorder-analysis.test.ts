import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { RecorderEvent } from "../../core/recorder/events.js";
import { exportForkFormat } from "../../core/recorder/export-fork-format.js";
import { FileSink } from "../../core/recorder/file-sink.js";
import { MemorySink, Recorder } from "../../core/recorder/recorder.js";
import { analyzeRecorderLog, formatRecorderReport, toAnalyzeResults } from "./recorder-analysis.js";

function assertClose(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual} is not ${expected}`);
}

// job_a: two turns, the second preempted once; JCT 10 - 0 = 10.
// job_b: one turn, pinned then expired and evicted; JCT 7 - 2 = 5.
// job_c: arrives and is aborted; it never departs, so it is not a complete job.
function twoJobLog(): RecorderEvent[] {
  const a = (requestId: string, timeS: number) => ({ programId: "job_a", requestId, timeS });
  const b = (timeS: number) => ({ programId: "job_b", requestId: "b1", timeS });
  return [
    { ...a("a1", 0), kind: "arrival" },
    { ...a("a1", 0.5), kind: "waiting_to_running", promptTokens: 1000, hitTokens: 0 },
    { ...b(2), kind: "arrival" },
    { ...a("a1", 3), kind: "departure", outputTokens: 50 },
    { ...a("a1", 3), kind: "pinned", ttlS: 2 },
    { ...b(3), kind: "waiting_to_running", promptTokens: 800, hitTokens: 0 },
    { ...a("a2", 4), kind: "arrival" },
    { ...a("a2", 4), kind: "unpinned", reason: "reused" },
    { ...a("a2", 4.25), kind: "waiting_to_running", promptTokens: 1200, hitTokens: 1000 },
    { ...a("a2", 5), kind: "preempted" },
    { ...a("a2", 6), kind: "evicted_to_running", promptTokens: 1250, hitTokens: 0 },
    { ...b(7), kind: "departure", outputTokens: 20 },
    { ...b(7), kind: "pinned", ttlS: 1 },
    { ...b(8), kind: "offloaded", tokens: 820, tier: "cpu" },
    { ...b(8.5), kind: "unpinned", reason: "expired" },
    { ...b(8.5), kind: "evicted", tokens: 820 },
    { programId: "job_c", requestId: "c1", timeS: 9, kind: "arrival" },
    { ...b(9.5), kind: "reloaded", tokens: 820, tier: "cpu" },
    { programId: "job_c", requestId: "c1", timeS: 9.5, kind: "aborted" },
    { ...a("a2", 10), kind: "departure", outputTokens: 40 },
  ];
}

function jsonlOf(events: RecorderEvent[]): string {
  const sink = new MemorySink();
  const recorder = new Recorder(sink);
  for (const event of events) recorder.record(event);
  return sink.toJsonl();
}

describe("analyzeRecorderLog", () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "recorder-analysis-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function writeLog(name: string, content: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, content);
    return path;
  }

  it("reproduces analyze.py's job statistics on a hand-checked log", async () => {
    const report = await analyzeRecorderLog(await writeLog("two-jobs.jsonl", jsonlOf(twoJobLog())));
    assert.equal(report.format, "jsonl");
    assert.deepEqual(report.jctByJobS, { job_a: 10, job_b: 5 });
    // numpy: mean([10, 5]) = 7.5, percentile(95) = 9.75, percentile(99) = 9.95
    const { jobs } = report;
    assert.equal(jobs.numJobs, 2);
    assert.equal(jobs.averageS, 7.5);
    assert.equal(jobs.medianS, 7.5);
    assertClose(jobs.p95S, 9.75, "p95");
    assertClose(jobs.p99S, 9.95, "p99");
    assert.equal(jobs.minS, 5);
    assert.equal(jobs.maxS, 10);
    assert.equal(jobs.totalDurationS, 10);
    assert.deepEqual(toAnalyzeResults(report), {
      num_jobs: 2,
      average_duration: 7.5,
      median_duration: 7.5,
      percentile_95: jobs.p95S,
      percentile_99: jobs.p99S,
      min_duration: 5,
      max_duration: 10,
      total_duration: 10,
    });
  });

  it("derives the cache, queue-wait and pin metrics", async () => {
    const report = await analyzeRecorderLog(await writeLog("cache.jsonl", jsonlOf(twoJobLog())));
    const { cache } = report;
    assert.equal(cache.admissions, 4);
    assert.equal(cache.admissionsAfterPreemption, 1);
    assert.equal(cache.promptTokens, 4250);
    assert.equal(cache.hitTokens, 1000);
    assert.equal(cache.hitRatio, 1000 / 4250);
    assert.equal(cache.prefillTokens, 3250);
    assert.equal(cache.prefillSavings.count, 4);
    assertClose(cache.prefillSavings.mean, 1000 / 1200 / 4, "mean prefill savings");
    // a1 waited 0.5 s, a2 0.25 s, b1 1 s; the re-admission after preemption is not a queue wait.
    assert.equal(report.queueWaitS.count, 3);
    assert.equal(report.queueWaitS.min, 0.25);
    assert.equal(report.queueWaitS.p50, 0.5);
    assert.equal(report.queueWaitS.max, 1);
    assert.deepEqual(
      [report.pinDurationS.count, report.pinDurationS.min, report.pinDurationS.max],
      [2, 1, 1.5],
    );
    assert.deepEqual(report.counts, {
      arrivals: 4,
      departures: 3,
      preemptions: 1,
      pins: 2,
      unpins: 2,
      evictions: 1,
      offloads: 1,
      reloads: 1,
      aborts: 1,
    });
  });

  it("gives the same report from the fork's scheduler_timestamps export of the same events", async () => {
    const jsonl = await writeLog("same.jsonl", jsonlOf(twoJobLog()));
    const fork = join(dir, "scheduler_timestamps");
    await exportForkFormat(jsonl, fork, { epochOffsetS: 0 });
    const fromJsonl = await analyzeRecorderLog(jsonl);
    const fromFork = await analyzeRecorderLog(fork);
    assert.equal(fromFork.format, "fork");
    // The fork's format has no keys for these, so they are unknown rather than zero.
    assert.deepEqual(
      [fromFork.counts.evictions, fromFork.counts.offloads, fromFork.counts.reloads, fromFork.counts.aborts],
      [null, null, null, null],
    );
    const unknownInFork = { evictions: null, offloads: null, reloads: null, aborts: null };
    assert.deepEqual(fromFork, {
      ...fromJsonl,
      format: "fork",
      counts: { ...fromJsonl.counts, ...unknownInFork },
    });
  });

  it("reads a pretty-printed fork file with Unix timestamps", async () => {
    const fork = {
      job_1: [
        { Request_arrival_time: 1711234567.5 },
        { waiting_to_running: 1711234568, prompt_length: 4096, hit_length: 3800 },
        { Request_departure_time: 1711234575 },
        { pinned_time: 1711234575 },
        { Request_arrival_time: 1711234575.25 },
        { unpinned_time: 1711234575.25 },
        { waiting_to_running: 1711234575.5, prompt_length: 4352, hit_length: 4096 },
        { Request_departure_time: 1711234580.5 },
      ],
      job_2: [{ Request_arrival_time: 1711234570 }],
    };
    const report = await analyzeRecorderLog(await writeLog("pretty.json", JSON.stringify(fork, null, 2)));
    assert.equal(report.format, "fork");
    assert.equal(report.jobs.numJobs, 1);
    assert.equal(report.jobs.averageS, 13);
    assert.equal(report.jobs.totalDurationS, 13);
    assert.deepEqual([report.queueWaitS.min, report.queueWaitS.max], [0.25, 0.5]);
    assert.equal(report.pinDurationS.mean, 0.25);
    assert.equal(report.cache.hitRatio, (3800 + 4096) / (4096 + 4352));
  });

  it("reports zeros for an empty log", async () => {
    const report = await analyzeRecorderLog(await writeLog("empty.jsonl", ""));
    assert.equal(report.jobs.numJobs, 0);
    assert.equal(report.jobs.totalDurationS, 0);
    assert.equal(report.cache.hitRatio, 0);
  });

  it("names the file and line of a corrupt JSONL event", async () => {
    const path = await writeLog(
      "bad.jsonl",
      `${jsonlOf(twoJobLog().slice(0, 2))}{"t":1,"event":"arrival"}\n`,
    );
    await assert.rejects(analyzeRecorderLog(path), /bad\.jsonl:3/);
  });

  it("streams a 200k-event FileSink log through the analysis", { timeout: 20_000 }, async () => {
    const programs = 1000;
    const requests = 40_000;
    const recorder = new Recorder(new FileSink(join(dir, "big")));
    for (let k = 0; k < requests; k++) {
      const programId = `job_${k % programs}`;
      const requestId = `r${k}`;
      const timeS = k * 0.25;
      recorder.record({ programId, requestId, timeS, kind: "arrival" });
      recorder.record({
        programId,
        requestId,
        timeS: timeS + 0.125,
        kind: "waiting_to_running",
        promptTokens: 100,
        hitTokens: 75,
      });
      recorder.record({ programId, requestId, timeS: timeS + 0.1875, kind: "departure", outputTokens: 10 });
      recorder.record({ programId, requestId, timeS: timeS + 0.1875, kind: "pinned", ttlS: 2 });
      recorder.record({ programId, requestId, timeS: timeS + 0.25, kind: "unpinned", reason: "expired" });
    }
    await recorder.close();

    const report = await analyzeRecorderLog(join(dir, "big.jsonl"));
    assert.equal(report.counts.arrivals, requests);
    assert.equal(report.jobs.numJobs, programs);
    assert.equal(report.cache.hitRatio, 0.75);
    assert.equal(report.queueWaitS.mean, 0.125);
    assert.equal(report.pinDurationS.count, requests);
    // job_0 arrives at 0 and its last request (k = 39000) departs at 39000 * 0.25 + 0.1875.
    assert.equal(report.jctByJobS["job_0"], 9750.1875);
  });
});

describe("formatRecorderReport", () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "recorder-format-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("prints analyze.py's block followed by the cache metrics", async () => {
    const path = join(dir, "log.jsonl");
    await writeFile(path, jsonlOf(twoJobLog()));
    const text = formatRecorderReport(await analyzeRecorderLog(path));
    assert.match(
      text,
      /^=== Job Duration Statistics ===\nNumber of jobs: 2\nAverage duration: 7\.50 seconds\nMedian duration: 7\.50 seconds\n95th percentile: 9\.75 seconds\n/,
    );
    assert.match(text, /Total duration: 10\.00 seconds/);
    assert.match(text, /Hit ratio: 23\.53% \(1000 of 4250 prompt tokens\)/);
    assert.match(text, /Evictions: 1\n/);
  });

  it("marks counts the fork's format cannot carry as n/a", async () => {
    const jsonl = join(dir, "for-fork.jsonl");
    await writeFile(jsonl, jsonlOf(twoJobLog()));
    const fork = join(dir, "scheduler_timestamps");
    await exportForkFormat(jsonl, fork, { epochOffsetS: 1_700_000_000 });
    const text = formatRecorderReport(await analyzeRecorderLog(fork));
    assert.match(text, /Number of jobs: 2\nAverage duration: 7\.50 seconds/);
    assert.match(text, /Evictions: n\/a/);
  });
});
