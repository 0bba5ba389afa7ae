import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ReplicaScrape } from "./replica-scrape.js";

/** A replica's answers, one per request, each after its delay (a rejection: no answer). */
function replica(answers: { delayMs: number; value?: string; error?: Error }[]) {
  let asked = 0;
  const load = (signal: AbortSignal) => {
    const answer = answers[Math.min(asked, answers.length - 1)] as (typeof answers)[number];
    asked++;
    return new Promise<string>((done, fail) => {
      const timer = setTimeout(
        () => (answer.error ? fail(answer.error) : done(answer.value as string)),
        answer.delayMs,
      );
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        fail(signal.reason);
      });
    });
  };
  return { load, asked: () => asked };
}

const refused = Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } });

describe("ReplicaScrape", () => {
  test("an answer within the deadline is fresh", async () => {
    const r = replica([{ delayMs: 1, value: "a" }]);
    const scrape = new ReplicaScrape(r.load, 1000);
    assert.deepEqual(await scrape.read(200), { value: "a", fresh: true, ageS: 0, error: null });
  });

  test("a replica slower than the deadline: its last answer, marked stale; asked once however many wait", async () => {
    const r = replica([
      { delayMs: 1, value: "first" },
      { delayMs: 300, value: "second" },
      { delayMs: 1, value: "third" },
    ]);
    const scrape = new ReplicaScrape(r.load, 1000);
    await scrape.read(200);
    await new Promise((done) => setTimeout(done, 20));
    const started = performance.now();
    const [late, alsoLate] = await Promise.all([scrape.read(50), scrape.read(50)]);
    assert.ok(performance.now() - started < 250, "the callers waited their deadline, not the replica");
    for (const read of [late, alsoLate]) {
      assert.equal(read.value, "first");
      assert.equal(read.fresh, false);
      assert.ok((read.ageS ?? 0) >= 0.02, `age ${read.ageS}`);
      assert.equal(read.error, "no answer within 50 ms");
    }
    assert.equal(r.asked(), 2, "one request under way, joined");
    await new Promise((done) => setTimeout(done, 300));
    assert.deepEqual(await scrape.read(50), { value: "third", fresh: true, ageS: 0, error: null });
  });

  test("a replica that failed: no value, and why (a refused connection, a request timed out)", async () => {
    const dead = new ReplicaScrape(replica([{ delayMs: 1, error: refused }]).load, 1000);
    assert.deepEqual(await dead.read(200), {
      value: null,
      fresh: false,
      ageS: null,
      error: "connection refused",
    });
    const cutOff = new ReplicaScrape(
      replica([
        { delayMs: 1, value: "a" },
        { delayMs: 10_000, value: "never" },
      ]).load,
      100,
    );
    await cutOff.read(200);
    assert.equal((await cutOff.read(20)).value, "a", "stale while its request runs");
    await new Promise((done) => setTimeout(done, 150));
    assert.deepEqual(await cutOff.read(20), {
      value: null,
      fresh: false,
      ageS: null,
      error: "no answer (timed out)",
    });
  });

  test("a replica that never answered is down once the deadline passes", async () => {
    const scrape = new ReplicaScrape(replica([{ delayMs: 10_000, value: "x" }]).load, 1000);
    assert.deepEqual(await scrape.read(20), {
      value: null,
      fresh: false,
      ageS: null,
      error: "no answer within 20 ms",
    });
  });
});
