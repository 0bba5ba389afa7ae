/**
 * A deliberately broken policy for `continuum policies --check` tests: programs whose prompts hit the
 * prefix cache most go first, by the share of their prompt tokens served from cache, which is 0 / 0 = NaN
 * before a program's first turn ran. A NaN priority compares false with everything, so the waiting order
 * silently means nothing; the check rejects NaN priorities.
 */
export default function createPolicy() {
  return {
    name: "nan-priority",
    description: "broken on purpose: a first turn's priority is NaN",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize(request, program) {
      request.priority[0] = request.preempted ? 0 : 1;
      // the bug: NaN while promptTokensServed is 0
      request.priority[1] = -(program.cachedTokensServed / program.promptTokensServed);
      request.priority[2] = program.arrivalOrder;
    },
    retain: () => ({ kind: "free" }),
    pinVictimRank: (program) => program.arrivalOrder,
  };
}
