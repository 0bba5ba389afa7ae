// @ts-check
/**
 * An example scheduling policy brought as an ES module (docs/custom-policies.md): program-level FCFS that
 * keeps a turn's KV cache pinned for a fixed few seconds when the turn ended in a tool call, so the
 * program's next turn, sent when the tool returns, finds its whole context still on the GPU instead of
 * recomputing it. Pins are capped at half the KV pool, so they never crowd out the running turns.
 *
 * Use it wherever a policy name goes:
 *   continuum simulate --policies vllm,./examples/policies/tool-pin.mjs --programs 50
 *   continuum policies --check ./examples/policies/tool-pin.mjs
 *   continuum serve --scheduling-policy ./examples/policies/tool-pin.mjs
 *
 * The types below come from the repository's sources (src/core/policy.ts); they are only for editors and
 * `tsc --checkJs`: the module itself is plain JavaScript with no imports.
 *
 * @typedef {import("../../src/core/policy.js").SchedulingPolicy} SchedulingPolicy
 * @typedef {import("../../src/core/policy.js").PolicyContext} PolicyContext
 * @typedef {import("../../src/core/request.js").Request} Request
 * @typedef {import("../../src/core/program.js").Program} Program
 * @typedef {import("../../src/core/retention.js").Retention} Retention
 */

/** How long a turn that called a tool keeps its KV for the program's next turn (seconds). */
const PIN_S = 3;
/** Pinned KV may take at most this share of the KV pool; past it, finished turns free theirs. */
const MAX_PINNED_SHARE = 0.5;
/** The tool name the scheduler passes to retain() when the turn called none it could identify. */
const NO_TOOL = "unknown";

/**
 * The module's default export: a factory the scheduler calls once per run (every simulation point, every
 * server). It takes no arguments and must return a new object each call, because a policy may keep
 * per-run state (statistics, counters) in it.
 *
 * @returns {SchedulingPolicy}
 */
export default function createPolicy() {
  return {
    // Shown in `continuum policies --check` and the server's banner; tables label the policy by the path
    // it was given as.
    name: "tool-pin",
    description: `program-FCFS; a turn ending in a tool call keeps its KV ${PIN_S} s, pins within ${MAX_PINNED_SHARE * 100}% of the pool`,
    // true only if the policy relies on an offload tier (CPU RAM) below the GPU pool
    needsOffload: false,
    // how a real server reads the tool from model output when the client gave no hint ("fork": the
    // authors' first-word-of-a-bash-block reading); the simulator always knows the tool
    toolParser: "paper",
    // false: a request's priority is computed when it enters the waiting queue (and again when its
    // program's pin comes or goes), not re-sorted at every step
    dynamicPriorities: false,

    /**
     * Waiting order: write request.priority, a tuple of three numbers compared left to right (smaller runs
     * first; the request's arrival breaks ties).
     *
     * @param {Request} request
     * @param {Program} program
     */
    prioritize(request, program) {
      // a preempted turn first (it held memory and lost it), as vLLM does
      request.priority[0] = request.preempted ? 0 : 1;
      // then a turn whose program holds a pin: admitting it releases the pin's memory into real work
      request.priority[1] = program.pin ? 0 : 1;
      // then programs in order of their first arrival: program-level FCFS
      request.priority[2] = program.arrivalOrder;
    },

    /**
     * A turn that is not its program's last finished: keep its KV ("pin", for ttlS seconds) or let it go to
     * the prefix cache, where any other request may evict it ("free"). A pin ends when the program's next
     * turn arrives (and reuses it), when it expires, or when an admission short of memory sacrifices it.
     *
     * @param {Request} request the finished turn (request.numComputedTokens: its KV in tokens)
     * @param {Program} _program its program
     * @param {string} tool the tool the turn called, "unknown" when none was identified
     * @param {PolicyContext} ctx the scheduler's state (ctx.programs(), ctx.kvCapacityTokens, ...)
     * @returns {Retention}
     */
    retain(request, _program, tool, ctx) {
      if (tool === NO_TOOL) return { kind: "free" };
      let pinnedTokens = 0;
      for (const program of ctx.programs()) pinnedTokens += program.pin?.tokens ?? 0;
      if (pinnedTokens + request.numComputedTokens > MAX_PINNED_SHARE * ctx.kvCapacityTokens) {
        return { kind: "free" };
      }
      return { kind: "pin", ttlS: PIN_S };
    },

    /**
     * Under memory pressure pins are given up largest rank first: the latest program's first, so an
     * earlier program never recomputes its context for a later one.
     *
     * @param {Program} program
     */
    pinVictimRank(program) {
      return program.arrivalOrder;
    },

    // Optional members, left out here (docs/custom-policies.md): admitsNewProgram and admitsTurn (hold a
    // turn back while others run), preemptsForAdmission, onProgramEnded, nextPriorityChangeS (with
    // dynamicPriorities), pinSacrifice and admitsWholePrompts.
  };
}
