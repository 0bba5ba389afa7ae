/**
 * Where the scheduler places KV in llama.cpp's sequences (sequence-map.ts), through the scheduler: the ops a
 * plan carries, applied to a model of llama.cpp's rules (core/test-support/seq-op-model.ts) that throws on any op
 * an executor could not carry out, and every sequence held against what the map says after every step.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkScheduler } from "../../check-scheduler.js";
import type { SchedulingPolicy } from "../../policy.js";
import type { Scheduler } from "../../scheduler.js";
import type { StepPlan } from "../../step-plan.js";
import { tokenRange } from "../../test-support/drive.js";
import { SeqOpModel } from "../../test-support/seq-op-model.js";
import type { LlamaSeqKvSpec } from "../kv-spec.js";
import type { TierConfig } from "../offload-tiers.js";
import { TokenIdContent } from "../token-content.js";
import type { SeqOp } from "./seq-ops.js";

const B = 16;

function spec(overrides: Partial<LlamaSeqKvSpec> = {}): LlamaSeqKvSpec {
  return {
    kind: "llama-seq",
    numSeqs: 4,
    cells: 64 * B + 64,
    layout: "unified",
    slidingWindow: 0,
    runningOnly: false,
    ...overrides,
  };
}

/** FCFS by program; a finished turn's KV pinned for `pinS` seconds, or freed (null). */
function policy(pinS: number | null): SchedulingPolicy {
  return {
    name: pinS === null ? "free" : `pin-${pinS}`,
    description: "test",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: (request, program) => {
      request.priority[0] = program.firstArrivalS;
    },
    retain: () => (pinS === null ? { kind: "free" } : { kind: "pin", ttlS: pinS }),
    pinVictimRank: (program) => program.firstArrivalS,
  };
}

const RAM: TierConfig[] = [{ name: "cpu", capacityBytes: 1 << 20, reloadBandwidthBps: 1e9 }];

/** A scheduler over llama.cpp's sequences, and the executor it drives (the op model). */
function setup(
  kvSpec: LlamaSeqKvSpec,
  options: { pinS?: number; numBlocks?: number; tiers?: TierConfig[] } = {},
) {
  const { scheduler, clock } = checkScheduler(policy(options.pinS ?? null), {
    numBlocks: options.numBlocks ?? 64,
    maxNumBatchedTokens: 256,
    maxNumSeqs: 2,
    kvSpec,
    ...(options.tiers ? { tiers: options.tiers } : {}),
  });
  const executor = new SeqOpModel(kvSpec);
  const map = scheduler.kv.sequences;
  assert.ok(map);
  const plans: StepPlan[] = [];
  const ops: SeqOp[] = [];
  const apply = (list: readonly SeqOp[]) => {
    executor.apply(list);
    ops.push(...list);
  };
  /** One step: the plan's ops applied, its chunks run, update's ops applied, all checked. */
  const step = () => {
    const plan = scheduler.schedule();
    apply(plan.ops);
    executor.runChunks(plan);
    clock.advanceTo(clock.nowS() + 0.01);
    const { finished, kvChanges } = scheduler.update(plan, { durationS: 0.01 });
    apply(kvChanges.ops);
    scheduler.checkInvariants();
    executor.checkAgainst(map);
    plans.push(plan);
    return finished;
  };
  const drain = () => {
    for (let i = 0; i < 200 && scheduler.hasUnfinishedRequests(); i++) step();
    assert.equal(scheduler.hasUnfinishedRequests(), false);
  };
  return { scheduler, clock, map, executor, plans, ops, step, drain };
}

/** A turn whose sequence is `tokens` (its prompt, then `output` tokens it will produce). */
function add(
  scheduler: Scheduler,
  id: string,
  tokens: readonly number[],
  output: number,
  program: string,
  last = false,
) {
  return scheduler.addRequest({
    requestId: id,
    programId: program,
    promptTokens: tokens.length - output,
    maxOutputTokens: output,
    isLastStep: last,
    toolHint: "ls",
    content: new TokenIdContent(tokens, B),
  });
}

const kinds = (ops: readonly SeqOp[]) => ops.map((o) => o.op);

describe("the sequence map (llama.cpp's sequences placed by the scheduler)", () => {
  test("an admission shares the longest prefix a running sequence holds (one unified pool)", () => {
    const { scheduler, step, ops, drain } = setup(spec());
    const shared = tokenRange(64, 1000);
    add(scheduler, "a", [...shared, ...tokenRange(40, 2000)], 30, "A");
    step();
    add(scheduler, "b", [...shared, ...tokenRange(20, 3000)], 2, "B");
    step();
    const b = scheduler.getRequest("b");
    assert.equal(b?.cachedTokens, 64);
    assert.deepEqual(
      ops.filter((o) => o.op === "copy"),
      [{ op: "copy", from: 0, to: 1, tokens: 64, mode: "share" }],
    );
    drain();
  });

  test("a program's next turn takes its pinned sequence over, past the last matched block", () => {
    const { scheduler, step, ops, drain, map } = setup(spec(), { pinS: 60 });
    const turn1 = tokenRange(70, 1000); // 66 prompt tokens + 4 out: the sequence ends 5 past a block
    add(scheduler, "t1", turn1, 4, "A");
    drain();
    assert.equal(map.seqs[0]?.pin?.programId, "A");
    const turn2 = [...turn1, ...tokenRange(30, 5000)];
    add(scheduler, "t2", turn2, 2, "A", true);
    step();
    // the first turn computed all but its last sampled token: 69 positions, none computed again
    assert.equal(scheduler.getRequest("t2")?.cachedTokens, 69);
    assert.equal(map.stats.takenOverTokens, 69);
    assert.ok(!ops.some((o) => o.op === "copy" || o.op === "restore"), JSON.stringify(ops));
    drain();
  });

  test("a block the pool hands out cuts the cached sequences backing it, and the rest is still hit", () => {
    const { scheduler, ops, drain, map } = setup(spec(), { numBlocks: 12 });
    const first = tokenRange(161, 1000);
    add(scheduler, "a", first, 1, "A", true); // 10 blocks computed, freed at its end: cache
    drain();
    assert.equal(map.seqs[0]?.length, 160);
    // 4 fresh blocks: the pool hands out the cache's last ones first (freed tail first)
    add(scheduler, "b", tokenRange(60, 9000), 1, "B", true);
    drain();
    const cut = ops.find((o) => o.op === "truncate");
    assert.ok(cut && cut.op === "truncate" && cut.seq === 0, JSON.stringify(ops));
    const kept = map.seqs[0]?.length ?? 0;
    assert.ok(kept > 0 && kept < 160 && kept % B === 0, `${kept} kept`);
    const c = add(scheduler, "c", [...first.slice(0, kept), ...tokenRange(10, 7000)], 1, "C", true);
    drain();
    assert.equal(c.cachedTokens, kept, "what the cut left is still a hit");
  });

  test("with a RAM tier a sequence nobody holds is saved and dropped at the step's end, and restored", () => {
    const { scheduler, step, ops, drain } = setup(spec(), { tiers: RAM });
    const turn1 = tokenRange(64, 1000);
    add(scheduler, "t1", turn1, 1, "A");
    drain();
    // the next step, whatever it runs, moves the sequence nobody holds into the tier
    add(scheduler, "x", tokenRange(20, 8000), 1, "X", true);
    step();
    assert.deepEqual(
      ops.filter((o) => o.op === "save" || o.op === "drop").map((o) => [o.op, "seq" in o ? o.seq : -1]),
      [
        ["save", 0],
        ["drop", 0],
      ],
    );
    drain();
    const t2 = add(scheduler, "t2", [...turn1, ...tokenRange(20, 4000)], 1, "A", true);
    step();
    assert.ok(ops.some((o) => o.op === "restore"));
    assert.equal(t2.cachedTokens, 63, "every position the first turn computed, restored");
    assert.equal(t2.cachedReloadTokens, 63);
    drain();
  });

  test("a program's newer saved state supersedes its older one: forgotten before the save", () => {
    const { scheduler, ops, drain } = setup(spec(), { tiers: RAM });
    add(scheduler, "t1", tokenRange(48, 1000), 1, "A");
    drain();
    add(scheduler, "t2", tokenRange(80, 3000), 1, "A", true); // parts from the first: a client's edit
    drain();
    add(scheduler, "x", tokenRange(20, 8000), 1, "X", true); // a step that spills the second
    drain();
    const saves = ops.filter((o) => o.op === "save");
    assert.equal(saves.length, 2);
    const first = saves[0];
    assert.ok(first?.op === "save");
    const forget = ops.findIndex((o) => o.op === "forget" && o.entry === first.entry);
    assert.ok(forget >= 0 && forget < ops.indexOf(saves[1] as SeqOp), JSON.stringify(ops));
  });

  test("no sequence left but pinned ones: without a tier a pin is sacrificed, with one it is parked", () => {
    for (const tiers of [undefined, RAM]) {
      const { scheduler, step, ops, drain, map } = setup(spec({ numSeqs: 3 }), {
        pinS: 60,
        ...(tiers ? { tiers } : {}),
      });
      // two programs pin their sequences; the third sequence is the spare one
      add(scheduler, "a1", tokenRange(40, 1000), 1, "A");
      add(scheduler, "b1", tokenRange(40, 2000), 1, "B");
      drain();
      assert.equal(scheduler.numPinnedPrograms, 2);
      // two new programs at once: one takes the spare sequence, the other needs a pinned one
      add(scheduler, "c1", tokenRange(40, 3000), 1, "C", true);
      add(scheduler, "d1", tokenRange(40, 4000), 1, "D", true);
      step();
      if (tiers) {
        assert.equal(map.stats.parkedPins, 1);
        assert.equal(scheduler.numPinnedPrograms, 2, "a parked pin stays");
        assert.ok(kinds(ops).includes("save"));
      } else {
        assert.equal(scheduler.numPinnedPrograms, 1, "a pin was sacrificed for the sequence");
        assert.equal(scheduler.stats.pinsSacrificed, 1);
      }
      drain();
    }
  });

  test("sliding window: a longer sequence's prefix is not offered; the chunk stops there and a checkpoint is copied", () => {
    const { scheduler, step, ops, drain, map } = setup(spec({ slidingWindow: 32 }));
    const shared = tokenRange(96, 1000);
    add(scheduler, "long", [...shared, ...tokenRange(60, 2000)], 1, "L", true);
    drain();
    add(scheduler, "second", [...shared, ...tokenRange(40, 3000)], 1, "S", true);
    step();
    const second = scheduler.getRequest("second");
    assert.equal(second?.cachedTokens, 0, "a window cannot be cut back: nothing offered");
    assert.equal(second?.numComputedTokens, 96, "its chunk stops where the shared prefix ends");
    step();
    assert.equal(map.stats.checkpointTokens, 96);
    assert.ok(ops.some((o) => o.op === "copy" && o.tokens === 96 && o.mode === "data"));
    drain();
    const third = add(scheduler, "third", [...shared, ...tokenRange(30, 4000)], 1, "T", true);
    drain();
    assert.equal(third.cachedTokens, 96, "the third copies the checkpoint");
  });

  test("streams: a prefix moves between sequences as a copy of its data", () => {
    const { scheduler, step, ops, drain } = setup(spec({ layout: "streams", cells: 4 * 1024 }));
    const shared = tokenRange(48, 1000);
    add(scheduler, "a", [...shared, ...tokenRange(40, 2000)], 20, "A");
    step();
    add(scheduler, "b", [...shared, ...tokenRange(20, 3000)], 1, "B");
    step();
    assert.deepEqual(
      ops.filter((o) => o.op === "copy"),
      [{ op: "copy", from: 0, to: 1, tokens: 48, mode: "data" }],
    );
    drain();
  });

  test("only running sequences in the pool: an admission into an emptied pool resets it first", () => {
    const { scheduler, step, ops, drain } = setup(spec({ runningOnly: true }), { pinS: 60, tiers: RAM });
    const turn1 = tokenRange(64, 1000);
    add(scheduler, "t1", turn1, 1, "A");
    drain();
    add(scheduler, "t2", [...turn1, ...tokenRange(20, 4000)], 1, "A", true);
    step();
    const last = kinds(ops).slice(-5);
    assert.deepEqual(last, ["save", "drop", "reset", "restore", "assign"], JSON.stringify(ops.slice(-5)));
    drain();
  });
});
