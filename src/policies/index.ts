import type { SchedulingPolicy } from "../core/policy.js";
import { createAutellixPolicy } from "./autellix.js";
import { createCacheTtlPolicy } from "./cachettl.js";
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
} satisfies Record<string, () => SchedulingPolicy>;

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
