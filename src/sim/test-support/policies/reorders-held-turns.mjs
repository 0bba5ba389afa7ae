/**
 * A deliberately broken policy for `continuum policies --check` tests: program-level FCFS whose admitsTurn
 * holds a new turn back while two others run and, to let it "age", moves it back in line by writing its
 * priority there. A priority may only be written in prioritize (the waiting queue is kept sorted by it), so
 * the queue goes out of order: the scheduler's invariant check catches it.
 */
export default function createPolicy() {
  return {
    name: "reorders-held-turns",
    description: "broken on purpose: writes a waiting turn's priority outside prioritize",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize(request, program) {
      request.priority[0] = request.preempted ? 0 : 1;
      request.priority[1] = 0;
      request.priority[2] = program.arrivalOrder;
    },
    retain: () => ({ kind: "pin", ttlS: 3 }),
    pinVictimRank: (program) => program.arrivalOrder,
    admitsTurn(request, _program, ctx) {
      if (ctx.numRunning < 2) return true;
      request.priority[2] += 100; // the bug: the queue is not re-sorted for this
      return false;
    },
  };
}
