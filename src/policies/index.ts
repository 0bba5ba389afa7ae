import type { SchedulingPolicy } from "../core/policy.js";
import { CONCUR_REUSABLE, createConcurPolicy } from "./admission-control/concur.js";
import { createMoriPolicy } from "./admission-control/mori.js";
import { createThunderAgentPolicy, THUNDERAGENT_DYNAMO } from "./admission-control/thunderagent.js";
import { createAutellixPolicy } from "./autellix.js";
import { createCacheTtlPolicy } from "./cachettl.js";
import {
  ADAPTIVE_DEFAULTS,
  type AdaptiveOptions,
  createCacheTtlAdaptivePolicy,
} from "./cachettl-adaptive.js";
import { createContinuumHeuristicPolicy } from "./continuum-heuristic.js";
import { createInferceptPolicy } from "./infercept.js";
import { isPolicyModuleSpec, policyModuleFactory } from "./policy-modules.js";
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
  // peers (issue #32): program-level pause/resume, and agent admission as congestion control
  thunderagent: () => createThunderAgentPolicy(),
  "thunderagent:dynamo": () =>
    createThunderAgentPolicy(
      THUNDERAGENT_DYNAMO,
      "thunderagent:dynamo",
      "ThunderAgent with NVIDIA Dynamo's port's defaults: pause at 0.95 of the pool down to 0.80 (then every reasoning program is marked), resume below 0.85, no decay of acting programs, turns soft-demoted 2 s at 0.80-0.95, resumed turns 1 s ahead",
    ),
  concur: () => createConcurPolicy(),
  // peer (issue #55): programs ranked by idleness across GPU and CPU memory, admission per tier
  mori: () => createMoriPolicy(),
  "concur:reusable": () =>
    createConcurPolicy(
      CONCUR_REUSABLE,
      "concur:reusable",
      "CONCUR with thrash judged against the reusable share: the window halves when KV usage reached 90% and the prefix hit rate fell 10% below the share of the looked-up tokens the agents' own earlier turns computed (what a cache that kept them would give), not below its own moving average, which never sees a batch that thrashes from the start",
    ),
  // ablations: each of cachettl-adaptive's choices changed in turn
  "cachettl-adaptive:no-admission": () =>
    adaptiveVariant(
      { admission: "off" },
      "no-admission",
      "no admission control (cachettl with the memory rules)",
    ),
  "cachettl-adaptive:current-context": () =>
    adaptiveVariant({ admission: "current" }, "current-context", "programs count at their current context"),
  "cachettl-adaptive:expected-final": () =>
    adaptiveVariant(
      { admission: "expected-final" },
      "expected-final",
      "programs count at their expected final context",
    ),
  "cachettl-adaptive:every-active": () =>
    adaptiveVariant({ counts: "every-active" }, "every-active", "every started program counts in full"),
  "cachettl-adaptive:holding-memory": () =>
    adaptiveVariant({ counts: "holding-memory" }, "holding-memory", "only programs holding KV now count"),
  "cachettl-adaptive:p90-pins": () =>
    adaptiveVariant({ ttl: "tool-p90" }, "p90-pins", "pins last the tool's p90 duration"),
  "cachettl-adaptive:eq2-pins": () =>
    adaptiveVariant(
      { ttl: "cachettl" },
      "eq2-pins",
      "pins last CacheTTL's eq. 2 TTL with or without an offload tier (the rule before: the default pins for the tool's p90 without one)",
    ),
  "cachettl-adaptive:pin-until-pressure": () =>
    adaptiveVariant(
      { ttl: "until-pressure" },
      "pin-until-pressure",
      "pins last until memory is needed (the longest tool call seen)",
    ),
  "cachettl-adaptive:no-pins": () =>
    adaptiveVariant({ ttl: "none" }, "no-pins", "no pins: a turn's KV is freed when it ends, as in vLLM"),
  "cachettl-adaptive:any-pin": () =>
    adaptiveVariant({ sacrifice: "any" }, "any-pin", "a turn short of memory may give up any program's pin"),
  "cachettl-adaptive:first-chunk": () =>
    adaptiveVariant({ room: "first-chunk" }, "first-chunk", "a turn starts once its first chunk fits"),
  "cachettl-adaptive:bounded-overtaking": () =>
    adaptiveVariant(
      { order: "bounded-overtaking" },
      "bounded-overtaking",
      "returning turns overtake only turns that arrived within the longest tool call",
    ),
  "cachettl-adaptive:request-fcfs": () =>
    adaptiveVariant(
      { order: "request-fcfs" },
      "request-fcfs",
      "waiting turns by their own arrival (vLLM's FCFS), not their program's",
    ),
  "cachettl-adaptive:pinned-first": () =>
    adaptiveVariant(
      { pinned: "first" },
      "pinned-first",
      "pinned programs' turns first, ahead of older programs' (the paper's tuple)",
    ),
  "cachettl-adaptive:newcomer-forecast": () =>
    adaptiveVariant(
      { newcomer: "forecast" },
      "newcomer-forecast",
      "a new program counts at its forecast footprint, not its prompt",
    ),
  "cachettl-adaptive:hold-longest-tool": () =>
    adaptiveVariant(
      { hold: "longest-tool" },
      "hold-longest-tool",
      "a new program is held at most the longest tool call seen",
    ),
  "cachettl-adaptive:tier-counts": () =>
    adaptiveVariant(
      { tier: "counts" },
      "tier-counts",
      "admission counts the offload tier as memory beside the KV pool (the rule before)",
    ),
  "cachettl-adaptive:tier-overflow": () =>
    adaptiveVariant(
      { tier: "overflow" },
      "tier-overflow",
      "with an offload tier, programs must fit the KV pool with their expected growth priced at a reload over a recompute (the tier takes the overflow)",
    ),
  "cachettl-adaptive:congestion": () =>
    adaptiveVariant(
      { headroom: "congestion" },
      "congestion",
      "admission fills memory up to a factor learned by CONCUR's congestion control: down when returning turns recompute or reload more than 10% of their reusable prefix, up one program while new programs wait without that",
    ),
} satisfies Record<string, () => SchedulingPolicy>;

function adaptiveVariant(change: Partial<AdaptiveOptions>, suffix: string, what: string): SchedulingPolicy {
  return createCacheTtlAdaptivePolicy(
    { ...ADAPTIVE_DEFAULTS, ...change },
    `cachettl-adaptive:${suffix}`,
    `ablation of cachettl-adaptive: ${what}`,
  );
}

export type PolicyName = keyof typeof FACTORIES;
export const POLICY_NAMES = Object.keys(FACTORIES) as PolicyName[];

export function isPolicyName(name: string): name is PolicyName {
  return Object.hasOwn(FACTORIES, name);
}

/**
 * A fresh policy instance (policies keep per-run statistics, so never share one between runs): a built-in
 * name, or the spec of a policy module loadPolicyModules loaded (src/policies/policy-modules.ts).
 */
export function createPolicy(name: string): SchedulingPolicy {
  if (isPolicyName(name)) return FACTORIES[name]();
  const fromModule = policyModuleFactory(name);
  if (fromModule) return fromModule();
  if (isPolicyModuleSpec(name)) {
    throw new Error(
      `policy module ${name} is not loaded: await loadPolicyModules([...]) (src/policies/policy-modules.ts) before creating its policy`,
    );
  }
  throw new Error(
    `unknown policy "${name}"; choose one of: ${POLICY_NAMES.join(", ")}, or a policy module (./my-policy.mjs)`,
  );
}

/** Is this a policy createPolicy may be asked for once its module, if any, is loaded? */
export function isPolicySpec(spec: string): boolean {
  return isPolicyName(spec) || isPolicyModuleSpec(spec);
}

export {
  isPolicyModuleSpec,
  isTypeScriptPolicyModule,
  loadPolicyModules,
  policyFileLabel,
  policyProblems,
} from "./policy-modules.js";
