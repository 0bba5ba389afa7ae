import type { SchedulingPolicy } from "../core/policy.js";
import { createAutellixPolicy } from "./autellix.js";
import { createCacheTtlPolicy } from "./cachettl.js";
import {
  ADAPTIVE_DEFAULTS,
  type AdaptiveOptions,
  createCacheTtlAdaptivePolicy,
} from "./cachettl-adaptive.js";
import { createContinuumHeuristicPolicy } from "./continuum-heuristic.js";
import { createInferceptPolicy } from "./infercept.js";
import { createProgramFcfsPolicy } from "./program-fcfs.js";
import { createStaticTtlPolicy } from "./static-ttl.js";
import { createVllmPolicy } from "./vllm.js";

const FACTORIES = {
  vllm: () => createVllmPolicy({ offload: false }),
  "vllm-offload": () => createVllmPolicy({ offload: true }),
  "program-fcfs": createProgramFcfsPolicy,
  "static-ttl": createStaticTtlPolicy,
  "continuum-heuristic": createContinuumHeuristicPolicy,
  autellix: () => createAutellixPolicy(),
  "autellix-offload": () => createAutellixPolicy({ offload: true }),
  infercept: createInferceptPolicy,
  cachettl: () => createCacheTtlPolicy({ offload: false }),
  "cachettl-offload": () => createCacheTtlPolicy({ offload: true }),
  "cachettl-adaptive": () => createCacheTtlAdaptivePolicy(),
  // ablations: each of cachettl-adaptive's choices changed in turn
  "cachettl-adaptive:no-admission": () => adaptiveVariant({ admission: "off" }, "no-admission"),
  "cachettl-adaptive:current-context": () => adaptiveVariant({ admission: "current" }, "current-context"),
  "cachettl-adaptive:expected-final": () =>
    adaptiveVariant({ admission: "expected-final" }, "expected-final"),
  "cachettl-adaptive:every-active": () => adaptiveVariant({ counts: "every-active" }, "every-active"),
  "cachettl-adaptive:holding-memory": () => adaptiveVariant({ counts: "holding-memory" }, "holding-memory"),
  "cachettl-adaptive:p90-pins": () => adaptiveVariant({ ttl: "tool-p90" }, "p90-pins"),
  "cachettl-adaptive:pin-until-pressure": () =>
    adaptiveVariant({ ttl: "until-pressure" }, "pin-until-pressure"),
  "cachettl-adaptive:bounded-overtaking": () =>
    adaptiveVariant({ order: "bounded-overtaking" }, "bounded-overtaking"),
} satisfies Record<string, () => SchedulingPolicy>;

function adaptiveVariant(change: Partial<AdaptiveOptions>, suffix: string): SchedulingPolicy {
  return createCacheTtlAdaptivePolicy({ ...ADAPTIVE_DEFAULTS, ...change }, `cachettl-adaptive:${suffix}`);
}

export type PolicyName = keyof typeof FACTORIES;
export const POLICY_NAMES = Object.keys(FACTORIES) as PolicyName[];

export function isPolicyName(name: string): name is PolicyName {
  return Object.hasOwn(FACTORIES, name);
}

/** A fresh policy instance (policies keep per-run statistics, so never share one between runs). */
export function createPolicy(name: string): SchedulingPolicy {
  if (!isPolicyName(name)) {
    throw new Error(`unknown policy "${name}"; choose one of: ${POLICY_NAMES.join(", ")}`);
  }
  return FACTORIES[name]();
}
