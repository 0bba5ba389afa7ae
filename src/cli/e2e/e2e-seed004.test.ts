/**
 * Seed 004 automated: the hands-on check of the authors' vLLM fork (a 5-turn agent program sending
 * job_id / is_last_step, ~1 s tool gaps, KV usage polled from /metrics), replayed against
 * `continuum serve` with the real llama.cpp engine (built-in tiny model, threads 1) on 127.0.0.1.
 *
 *   (a) continuum-heuristic (the fork's rule, fixed 2 s pin): KV stays resident through every gap,
 *       turn 2+ reuses it, the last step frees it.
 *   (b) cachettl (the paper's cost model): at cold start it does not pin an idle program (yet the LRU
 *       prefix cache still serves it); once requests of evicted programs have queued, it does pin.
 *   (c) vllm under memory pressure: the returning turn is re-prefilled.
 *
 * About cached_tokens: the server reports whole 16-token blocks of the new prompt found in KV. The
 * previous prompt is always found (the template and the built-in tokenizer keep token boundaries at
 * turn boundaries). The previous reply is re-sent as text, and the tiny random-weight model sometimes
 * samples a non-canonical split of a word (or a byte-fallback token) that re-tokenizes differently,
 * so the reuse of the reply part is only bounded by its length; replies are capped at 8 tokens.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import type { RecorderEvent } from "../../core/recorder/events.js";
import { COLD_START_SAMPLES } from "../../core/ttl/ttl-model.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { type LlamaServer, sleep, startLlamaServer, withExtraBody } from "../test-support/llama-server.js";

const BLOCK = 16;
const MAX_TOKENS = 8;
const USAGE = "continuum:kv_cache_usage_perc";
const PINNED = "continuum:num_pinned_programs";

/** The seed's program: five tasks, each answered by a bash block, with simulated tool output between. */
const TASKS = [
  { task: "List files in the project.", tool: "ls", output: "main.py\nutils.py\ntests/\nREADME.md" },
  {
    task: "Read main.py.",
    tool: "cat",
    output: "import utils\n\n\ndef main():\n    # TODO: handle errors\n    print(utils.greet('world'))\n",
  },
  {
    task: "Search for TODO comments.",
    tool: "grep",
    output: "./main.py:5:    # TODO: handle errors\n./utils.py:2:# TODO: add docstrings",
  },
  {
    task: "Check git status.",
    tool: "git",
    output: "On branch main\nChanges not staged:\n  modified: main.py",
  },
  { task: "Run pytest.", tool: "pytest", output: "" },
];

interface Sample {
  readonly usage: number;
  readonly pinned: number;
}

interface TurnRecord {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
  /** /metrics right after the response */
  readonly after: Sample;
  /** /metrics during the tool gap that follows (empty after the last step) */
  readonly gap: Sample[];
  /** the TTL model's mean queueing delay T after this turn (seconds) */
  readonly queueingS: number;
}

async function sample(s: LlamaServer): Promise<Sample> {
  const m = await s.metrics();
  return { usage: m[USAGE]!, pinned: m[PINNED]! };
}

/**
 * Runs the 5-turn program with job_id / is_last_step / this_func_call as extra_body, sleeping `gapMs`
 * between turns (the tool call) and sampling /metrics at `sampleAtMs` within each gap.
 */
async function runProgram(
  s: LlamaServer,
  jobId: string,
  gapMs: number,
  sampleAtMs: readonly number[],
): Promise<TurnRecord[]> {
  const messages: ChatCompletionMessageParam[] = [
    { role: "system", content: "Respond with ONLY a ```bash``` block." },
  ];
  const turns: TurnRecord[] = [];
  for (const [i, step] of TASKS.entries()) {
    const last = i === TASKS.length - 1;
    // the job id makes each program's conversation its own (greedy replies would otherwise repeat)
    messages.push({ role: "user", content: i === 0 ? `[${jobId}] ${step.task}` : step.task });
    const response = await s.openai.chat.completions.create(
      withExtraBody<ChatCompletionCreateParamsNonStreaming>(
        { model: s.model, messages, max_tokens: MAX_TOKENS, temperature: 0 },
        { job_id: jobId, is_last_step: last, this_func_call: step.tool },
      ),
    );
    const after = await sample(s);
    const gap: Sample[] = [];
    if (!last) {
      const start = performance.now();
      for (const at of sampleAtMs) {
        await sleep(Math.max(0, at - (performance.now() - start)));
        gap.push(await sample(s));
      }
      await sleep(Math.max(0, gapMs - (performance.now() - start)));
    }
    const usage = response.usage!;
    turns.push({
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
      after,
      gap,
      queueingS: s.engine.scheduler.ttl.queueing.meanS(),
    });
    messages.push({ role: "assistant", content: response.choices[0]!.message.content ?? "" });
    if (!last) messages.push({ role: "tool", tool_call_id: `${step.tool}-${i}`, content: step.output });
  }
  return turns;
}

/**
 * Turn 2+ reused the previous turn's KV: its whole prompt, and at most the reply's tokens short of it (the
 * sequence is continued past its last whole block; its last sampled token was never computed).
 */
function assertReusedPreviousContext(turns: readonly TurnRecord[]): void {
  for (let k = 1; k < turns.length; k++) {
    const prev = turns[k - 1]!;
    const cur = turns[k]!;
    const prevContext = prev.promptTokens + prev.completionTokens;
    const detail = `turn ${k + 1}: cached ${cur.cachedTokens}, previous prompt ${prev.promptTokens} + completion ${prev.completionTokens}`;
    assert.ok(cur.cachedTokens < prevContext, detail);
    assert.ok(cur.cachedTokens >= Math.floor(prev.promptTokens / BLOCK) * BLOCK, detail);
    assert.ok(prevContext - cur.cachedTokens < BLOCK + MAX_TOKENS, detail);
  }
}

/** The program's last step leaves nothing pinned or in use (polled briefly). */
async function assertFreedAfterLastStep(s: LlamaServer, turns: readonly TurnRecord[]): Promise<void> {
  let now = turns.at(-1)!.after;
  for (let i = 0; i < 20 && (now.usage !== 0 || now.pinned !== 0); i++) {
    await sleep(25);
    now = await sample(s);
  }
  assert.deepEqual(now, { usage: 0, pinned: 0 });
}

function eventsOf(events: readonly RecorderEvent[], programId: string, kind: RecorderEvent["kind"]) {
  return events.filter((e) => e.programId === programId && e.kind === kind);
}

describe("seed 004 against the llama.cpp engine (tiny model)", { skip: llamaSkip }, () => {
  test("(a) continuum-heuristic: KV pinned and flat through each ~1 s tool gap, reused by turn 2+, freed by the last step", async () => {
    const s = await startLlamaServer([
      "--scheduling-policy",
      "continuum-heuristic",
      "--kv-cache-tokens",
      "4096",
    ]);
    let events: RecorderEvent[] = [];
    try {
      assert.deepEqual(await sample(s), { usage: 0, pinned: 0 }, "baseline");
      const turns = await runProgram(s, "job_alpha", 1000, [300, 600, 900]);
      for (const [k, turn] of turns.slice(0, -1).entries()) {
        const detail = `turn ${k + 1}: after ${JSON.stringify(turn.after)}, gap ${JSON.stringify(turn.gap)}`;
        assert.ok(turn.after.usage > 0, detail);
        assert.equal(turn.after.pinned, 1, detail);
        for (const g of turn.gap) assert.deepEqual(g, turn.after, detail);
        if (k > 0) assert.ok(turn.after.usage > turns[k - 1]!.after.usage, `context grows: ${detail}`);
      }
      assert.equal(turns[0]!.cachedTokens, 0, "turn 1 starts cold");
      assertReusedPreviousContext(turns);
      await assertFreedAfterLastStep(s, turns);
    } finally {
      events = await s.close();
    }
    // The event log: four 2 s pins, each taken over by the next turn; none expired.
    assert.deepEqual(
      eventsOf(events, "job_alpha", "pinned").map((e) => (e.kind === "pinned" ? e.ttlS : null)),
      [2, 2, 2, 2],
    );
    assert.deepEqual(
      eventsOf(events, "job_alpha", "unpinned").map((e) => (e.kind === "unpinned" ? e.reason : null)),
      ["reused", "reused", "reused", "reused"],
    );
  });

  test(
    "(b) cachettl: at cold start (T = 0, < K = 100 tool samples) TTL = T_default = max(0, ln(T + PrefillReload)) = 0 " +
      "for a tiny CPU prefill, so an idle program is NOT pinned, yet turn 2+ hits its prefix in the LRU cache; " +
      "once evicted programs' requests have queued (T > 1 s) it DOES pin, for ln(T + PrefillReload)",
    async () => {
      // One running request at a time: the contention phase below queues requests for real.
      const s = await startLlamaServer(["--max-num-seqs", "1", "--kv-cache-tokens", "4096"]);
      let events: RecorderEvent[] = [];
      const ttl = s.engine.scheduler.ttl;
      try {
        // --- cold start: the same 5-turn program, ~1 s gaps
        const cold = await runProgram(s, "job_cold", 1000, [300, 600, 900]);
        for (const [k, turn] of cold.slice(0, -1).entries()) {
          const detail = `turn ${k + 1}: after ${JSON.stringify(turn.after)}, gap ${JSON.stringify(turn.gap)}`;
          assert.deepEqual(turn.after, { usage: 0, pinned: 0 }, detail);
          for (const g of turn.gap) assert.deepEqual(g, { usage: 0, pinned: 0 }, detail);
        }
        // Freed blocks stay in the prefix cache (no memory pressure): the next turn still hits them.
        assertReusedPreviousContext(cold);
        assert.equal((await s.metrics())["continuum:pins_created_total"], 0);
        assert.ok(ttl.tools.totalRecorded <= COLD_START_SAMPLES);
        // T: the returning turns of this idle program did not wait.
        assert.ok(cold.at(-1)!.queueingS < 0.1, `T = ${cold.at(-1)!.queueingS}`);

        // --- contention. One running request at a time (--max-num-seqs 1): a long generation of
        // another program holds it while the returning turns of 16 programs that already ran a turn
        // (and hold no pin) queue behind it, until its client stops the stream after HOLD_MS. The
        // scheduler measures their queueing delay; T is the mean over every returning turn of an
        // evicted program, the idle program's four zero waits above included (~0.8 x HOLD_MS).
        const HOLD_MS = 2500;
        const ids = Array.from({ length: 16 }, (_, i) => `contender-${i}`);
        const first = (id: string): ChatCompletionMessageParam[] => [
          { role: "system", content: "Respond with ONLY a ```bash``` block." },
          { role: "user", content: `Task ${id}: find the failing test.` },
        ];
        const turn = (id: string, messages: ChatCompletionMessageParam[], lastStep: boolean) =>
          s.openai.chat.completions.create(
            withExtraBody<ChatCompletionCreateParamsNonStreaming>(
              { model: s.model, messages, max_tokens: 1, temperature: 0 },
              { job_id: id, is_last_step: lastStep, this_func_call: "pytest" },
            ),
          );
        await Promise.all(ids.map((id) => turn(id, first(id), false)));
        const hold = new AbortController();
        const long = await s.openai.chat.completions.create(
          withExtraBody<ChatCompletionCreateParamsStreaming>(
            {
              model: s.model,
              messages: [{ role: "user", content: "Write a very long build log." }],
              max_tokens: 3000,
              temperature: 0,
              stream: true,
            },
            { job_id: "batch-job", ignore_eos: true },
          ),
          { signal: hold.signal },
        );
        const longChunks = long[Symbol.asyncIterator]();
        await longChunks.next(); // it is running
        const returning = Promise.all(
          ids.map((id) =>
            turn(
              id,
              [
                ...first(id),
                { role: "assistant", content: "```bash\npytest\n```" },
                { role: "tool", tool_call_id: "pytest-0", content: "1 failed" },
              ],
              true,
            ),
          ),
        );
        for (
          let i = 0;
          i < 200 && (await s.metrics())["continuum:num_requests_waiting"] !== ids.length;
          i++
        ) {
          await sleep(10);
        }
        assert.equal((await s.metrics())["continuum:num_requests_waiting"], ids.length);
        await sleep(HOLD_MS);
        hold.abort();
        try {
          while (!(await longChunks.next()).done) {}
        } catch {
          // the SDK surfaces the abort as an error
        }
        for (const r of await returning) assert.ok(r.usage!.prompt_tokens_details!.cached_tokens! > 0);
        const queueingS = ttl.queueing.meanS();
        assert.equal(ttl.queueing.size, cold.length - 1 + ids.length);
        assert.ok(queueingS > 1.5, `mean queueing delay of evicted programs T = ${queueingS} s`);
        assert.ok(ttl.tools.totalRecorded <= COLD_START_SAMPLES, "still the cold-start rule");

        // --- the same program again: now each non-last turn is pinned for ln(T + PrefillReload) > 0
        // (about 0.7 s for T = 2 s). Its tool gaps are shorter than that (0.25 s), so every turn comes
        // back to its pin (and, not evicted, adds nothing to T).
        const warm = await runProgram(s, "job_warm", 250, [120]);
        for (const [k, turn] of warm.slice(0, -1).entries()) {
          const detail = `turn ${k + 1}: after ${JSON.stringify(turn.after)}, gap ${JSON.stringify(turn.gap)}`;
          assert.ok(turn.after.usage > 0, detail);
          assert.equal(turn.after.pinned, 1, detail);
          for (const g of turn.gap) assert.deepEqual(g, turn.after, detail);
        }
        assertReusedPreviousContext(warm);
        await assertFreedAfterLastStep(s, warm);
      } finally {
        events = await s.close();
      }
      assert.equal(eventsOf(events, "job_cold", "pinned").length, 0);
      const pins = eventsOf(events, "job_warm", "pinned");
      assert.equal(pins.length, 4);
      for (const pin of pins) {
        assert.ok(pin.kind === "pinned");
        // B = T + PrefillReload(context) with PrefillReload of a few hundred tokens well under 0.25 s
        const detail = `TTL ${pin.ttlS} s for T = ${ttl.queueing.meanS()} s`;
        assert.ok(pin.ttlS > Math.log(ttl.queueing.meanS()), detail);
        assert.ok(pin.ttlS < Math.log(ttl.queueing.meanS() + 0.25), detail);
      }
      assert.deepEqual(
        eventsOf(events, "job_warm", "unpinned").map((e) => (e.kind === "unpinned" ? e.reason : null)),
        ["reused", "reused", "reused", "reused"],
      );
    },
  );

  test("(c) vllm: with a small pool, another program's long prompts during the gap evict the freed KV; the returning turn is re-prefilled", async () => {
    const s = await startLlamaServer([
      "--scheduling-policy",
      "vllm",
      "--kv-cache-tokens",
      "1024",
      // no RAM tier (a CPU engine gets one by default): evicted KV must be re-prefilled
      "--cpu-offload-gb",
      "0",
    ]);
    try {
      const ask = (jobId: string, messages: ChatCompletionMessageParam[], maxTokens = MAX_TOKENS) =>
        s.openai.chat.completions.create(
          withExtraBody<ChatCompletionCreateParamsNonStreaming>(
            { model: s.model, messages, max_tokens: maxTokens, temperature: 0 },
            { job_id: jobId, is_last_step: false },
          ),
        );
      const twoTurns = async (jobId: string, duringGap: () => Promise<void>) => {
        const messages: ChatCompletionMessageParam[] = [
          { role: "system", content: "Respond with ONLY a ```bash``` block." },
          { role: "user", content: `${jobId}: ${TASKS[0]!.task}` },
        ];
        const first = await ask(jobId, messages);
        const gap = await sample(s);
        await duringGap();
        messages.push({ role: "assistant", content: first.choices[0]!.message.content ?? "" });
        messages.push({ role: "tool", tool_call_id: "ls-0", content: TASKS[0]!.output });
        messages.push({ role: "user", content: TASKS[1]!.task });
        const second = await ask(jobId, messages);
        return {
          gap,
          prevContext: first.usage!.prompt_tokens + first.usage!.completion_tokens,
          prevPrompt: first.usage!.prompt_tokens,
          cached: second.usage!.prompt_tokens_details?.cached_tokens ?? 0,
        };
      };

      // Without pressure the freed KV is still in the LRU prefix cache.
      const quiet = await twoTurns("job_quiet", () => sleep(200));
      assert.deepEqual(quiet.gap, { usage: 0, pinned: 0 }, "vllm frees at the end of the turn");
      assert.ok(quiet.cached >= Math.floor(quiet.prevPrompt / BLOCK) * BLOCK, JSON.stringify(quiet));

      // Under pressure: two prompts of another program, each ~85% of the pool, during the gap.
      const capacity = s.engine.maxContextTokens;
      const fillerMessages = (n: number): ChatCompletionMessageParam[] => {
        const lines: string[] = [];
        const turns = () => [
          { role: "system" as const, content: `Summarise build log ${n}.` },
          { role: "user" as const, content: lines.join("\n") },
        ];
        while (s.engine.countTokens(s.engine.renderChat(turns())) < capacity * 0.85) {
          lines.push(`log ${n}.${lines.length} build ok`);
        }
        return turns();
      };
      const pressured = await twoTurns("job_pressured", async () => {
        for (const n of [1, 2]) await ask("job_filler", fillerMessages(n), 1);
      });
      assert.deepEqual(pressured.gap, { usage: 0, pinned: 0 });
      assert.ok(
        pressured.cached <= BLOCK && pressured.cached < pressured.prevContext / 2,
        `re-prefilled: cached ${pressured.cached} of the previous ${pressured.prevContext}`,
      );
      const m = await s.metrics();
      assert.equal(m["continuum:pins_created_total"], 0);
    } finally {
      await s.close();
    }
  });
});
