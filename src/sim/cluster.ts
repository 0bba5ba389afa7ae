/**
 * N simulated replicas behind a router, on one virtual clock. Each replica is the production scheduler
 * driven by the shared step loop (StepLoop.next() when the replica is free, complete() when its step
 * ends); steps of different replicas overlap in time, so a step's end is an event rather than a jump of
 * the clock. The router sees each replica's queue (waiting + running) when a request arrives.
 */
import type { VirtualClock } from "../core/clock.js";
import type { Scheduler } from "../core/scheduler.js";
import { StepLoop } from "../core/step-loop.js";
import type { StepPlan, StepResult } from "../core/step-plan.js";
import { type SimProgramSpec, type SimRunResult, SimulatedPrograms } from "./event-loop.js";

export const ROUTER_NAMES = ["round-robin", "least-loaded", "program-hash", "sticky-least-loaded"] as const;
export type RouterName = (typeof ROUTER_NAMES)[number];

export function isRouterName(name: string): name is RouterName {
  return (ROUTER_NAMES as readonly string[]).includes(name);
}

/** Chooses a replica index for each new request. */
export type Router = (programId: string, turn: number, replicas: readonly Scheduler[]) => number;

function load(scheduler: Scheduler): number {
  return scheduler.numWaiting + scheduler.numRunning;
}

function leastLoaded(replicas: readonly Scheduler[]): number {
  let best = 0;
  for (let i = 1; i < replicas.length; i++) {
    if (load(replicas[i] as Scheduler) < load(replicas[best] as Scheduler)) best = i;
  }
  return best;
}

/** 32-bit FNV-1a with murmur3's finalizer (so ids that differ in one character land far apart). */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * - round-robin: requests in turn, whatever their program (vLLM behind a plain balancer);
 * - least-loaded: the replica with the shortest queue, per request;
 * - program-hash: rendezvous (highest-random-weight) hashing of the program id, a consistent hash: a
 *   program's turns always meet its KV, whatever the load;
 * - sticky-least-loaded: a program's first turn goes to the least-loaded replica, its later turns to the
 *   same one (the vLLM router's sticky_least_loaded).
 */
export function createRouter(name: RouterName): Router {
  switch (name) {
    case "round-robin": {
      let next = 0;
      return (_id, _turn, replicas) => next++ % replicas.length;
    }
    case "least-loaded":
      return (_id, _turn, replicas) => leastLoaded(replicas);
    case "program-hash":
      return (id, _turn, replicas) => {
        let best = 0;
        let bestWeight = -1;
        for (let i = 0; i < replicas.length; i++) {
          const weight = hash32(`${id}#${i}`);
          if (weight > bestWeight) {
            best = i;
            bestWeight = weight;
          }
        }
        return best;
      };
    case "sticky-least-loaded": {
      const home = new Map<string, number>();
      return (id, turn, replicas) => {
        const known = home.get(id);
        if (known !== undefined) {
          if (turn === 0) home.delete(id);
          else return known;
        }
        const chosen = leastLoaded(replicas);
        home.set(id, chosen);
        return chosen;
      };
    }
  }
}

export interface ClusterRunOptions {
  readonly schedulers: readonly Scheduler[];
  readonly clock: VirtualClock;
  readonly router: Router;
  readonly blockSizeTokens: number;
  /** duration of one step of a replica (the latency model plus reload transfers) */
  readonly stepTimeS: (plan: StepPlan) => number;
  readonly onStep?: (replica: number, plan: StepPlan, durationS: number) => void;
  readonly horizonS?: number;
  readonly seedSalt?: number;
}

interface ReplicaState {
  readonly loop: StepLoop;
  inFlight: { plan: StepPlan; result: StepResult; endS: number } | null;
  /** an idle replica's next own wake-up (a pin's expiry); null: only an arrival wakes it */
  wakeS: number | null;
}

/** The world of one replica is the cluster's: arrivals come through the router, not the replica. */
const ROUTED = {
  deliverDue: () => {},
  nextEventS: () => null,
  isOver: () => false,
  waitUntil: () => true,
};

export function runClusterSimulation(specs: readonly SimProgramSpec[], o: ClusterRunOptions): SimRunResult {
  const { clock, schedulers } = o;
  if (schedulers.length === 0) throw new Error("a cluster needs at least one replica");
  const horizonS = o.horizonS ?? Number.POSITIVE_INFINITY;
  const programs = new SimulatedPrograms(
    specs,
    (programId, turn) => schedulers[o.router(programId, turn, schedulers)] as Scheduler,
    clock,
    horizonS,
    o.blockSizeTokens,
    o.seedSalt ?? 0,
  );
  const pricing = { execute: (plan: StepPlan): StepResult => ({ durationS: o.stepTimeS(plan) }) };
  const replicas: ReplicaState[] = schedulers.map((scheduler, index) => ({
    loop: new StepLoop(scheduler, clock, ROUTED, pricing, {
      onStep: (plan, result) => {
        programs.onStep(plan);
        o.onStep?.(index, plan, result.durationS);
      },
      onFinished: (finished) => programs.onFinished(finished),
    }),
    inFlight: null,
    wakeS: null,
  }));

  let steps = 0;
  for (;;) {
    const nowS = clock.nowS();
    for (const replica of replicas) {
      const step = replica.inFlight;
      if (step && step.endS <= nowS) {
        replica.inFlight = null;
        replica.loop.complete(step.plan, step.result);
        steps++;
      }
    }
    programs.deliverDue(nowS);
    if (nowS >= horizonS) break;
    for (const replica of replicas) {
      if (replica.inFlight) continue;
      const action = replica.loop.next();
      if (action.kind === "step") {
        const result = pricing.execute(action.plan);
        replica.inFlight = { plan: action.plan, result, endS: nowS + result.durationS };
        replica.wakeS = null;
      } else replica.wakeS = action.kind === "wait" ? action.untilS : null;
    }
    let nextS = programs.nextEventS() ?? Number.POSITIVE_INFINITY;
    for (const replica of replicas) {
      nextS = Math.min(nextS, replica.inFlight?.endS ?? replica.wakeS ?? Number.POSITIVE_INFINITY);
    }
    if (nextS === Number.POSITIVE_INFINITY) break;
    clock.advanceTo(Math.max(nowS, Math.min(nextS, horizonS)));
  }
  return { programs: programs.live.map((p) => p.outcome), steps, endS: clock.nowS() };
}
