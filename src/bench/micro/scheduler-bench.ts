/**
 * Scheduler micro-benchmark: microseconds per schedule()+update() with 256 running and ~1000 waiting
 * requests, vllm vs cachettl side by side in one run (ratios are what to compare on a noisy machine).
 * Usage: npm run bench:scheduler [-- --steps 20000]
 */
import { parseArgs } from "node:util";
import { VirtualClock } from "../../core/clock.js";
import { quadraticCostModel } from "../../core/cost/cost-model.js";
import { Rng } from "../../core/rng.js";
import { Scheduler } from "../../core/scheduler.js";
import { createPolicy } from "../../policies/index.js";
import { SyntheticConversation } from "../../sim/synthetic-conversation.js";

const RUNNING = 256;
const WAITING = 1000;
const BLOCK = 16;

interface BenchResult {
  policy: string;
  usPerStep: number;
  steps: number;
  pins: number;
  preemptions: number;
  running: number;
  waiting: number;
}

function runBench(policyName: string, steps: number, seed: number): BenchResult {
  const rng = new Rng(seed);
  const clock = new VirtualClock();
  const scheduler = new Scheduler(
    {
      // Room for every running sequence, so the figure is the cost of scheduling 256 running + 1000
      // waiting, not of a preemption storm.
      numBlocks: 600_000,
      blockSizeTokens: BLOCK,
      maxNumBatchedTokens: 2048,
      maxNumSeqs: RUNNING,
      kvBytesPerToken: 131072,
      costs: quadraticCostModel({
        prefillQuadratic: { a: 1e-10, b: 5e-5, c: 0.01 },
        kvBytesPerToken: 131072,
        reloadBandwidthBps: {},
      }),
    },
    { clock, policy: createPolicy(policyName) },
  );
  // Start from a warm cost model (as after serving a while), so cachettl actually pins during the run.
  for (let i = 0; i < 500; i++) {
    scheduler.ttl.tools.record(
      rng.pick(["python", "grep", "str_replace_editor", "find"]),
      rng.exponential(0.5),
    );
    scheduler.ttl.queueing.observe(rng.exponential(5));
  }
  const programs = Array.from({ length: RUNNING + WAITING }, (_, i) => ({
    id: `p${i}`,
    turn: 0,
    context: rng.int(500, 3000),
    conversation: new SyntheticConversation(i + 1, BLOCK),
  }));
  const send = (index: number) => {
    const program = programs[index] as (typeof programs)[number];
    // Long outputs keep the running set near maxNumSeqs; the budget goes mostly to decodes, as in steady serving.
    const output = rng.int(300, 3000);
    const cached = program.context;
    const input = cached + rng.int(50, 400);
    scheduler.addRequest({
      requestId: `${program.id}#${program.turn}`,
      programId: program.id,
      promptTokens: input,
      maxOutputTokens: output,
      isLastStep: false,
      toolHint: rng.pick(["python", "grep", "str_replace_editor", "find"]),
      content: program.conversation.nextTurn(program.turn, input, cached, output),
    });
    program.turn++;
    program.context = input + output;
  };
  programs.forEach((_, i) => {
    send(i);
  });
  const indexOf = new Map(programs.map((p, i) => [p.id, i]));
  const warmup = 2000;
  let start = 0;
  let runningSum = 0;
  let waitingSum = 0;
  for (let step = 0; step < warmup + steps; step++) {
    if (step === warmup) start = performance.now();
    if (step >= warmup) {
      runningSum += scheduler.numRunning;
      waitingSum += scheduler.numWaiting;
    }
    const plan = scheduler.schedule();
    clock.advanceTo(clock.nowS() + 0.02);
    const { finished } = scheduler.update(plan, { durationS: 0.02 });
    for (const request of finished) {
      const index = indexOf.get(request.programId) as number;
      if ((programs[index] as (typeof programs)[number]).context > 30_000) continue;
      send(index);
    }
  }
  const elapsedMs = performance.now() - start;
  return {
    policy: policyName,
    usPerStep: (elapsedMs * 1000) / steps,
    steps,
    pins: scheduler.stats.pinsCreated,
    preemptions: scheduler.stats.preemptions,
    running: runningSum / steps,
    waiting: waitingSum / steps,
  };
}

const { values } = parseArgs({
  options: { steps: { type: "string", default: "20000" }, seed: { type: "string", default: "1" } },
});
const steps = Number(values.steps);
const seed = Number(values.seed);
console.log(
  `scheduler micro-benchmark: ${RUNNING} running, ~${WAITING} waiting, ${steps} steps, seed ${seed}`,
);
const results = ["vllm", "cachettl"].map((name) => runBench(name, steps, seed));
const base = results[0] as BenchResult;
for (const r of results) {
  console.log(
    `${r.policy.padEnd(10)} ${r.usPerStep.toFixed(1).padStart(7)} us/step  (${(r.usPerStep / base.usPerStep).toFixed(2)}x vllm)` +
      `  pins ${r.pins}, preemptions ${r.preemptions}, mean ${r.running.toFixed(0)} running / ${r.waiting.toFixed(0)} waiting`,
  );
}
console.log("paper (Python, vLLM): ~950 us/step; target here: <= 50 us/step");
