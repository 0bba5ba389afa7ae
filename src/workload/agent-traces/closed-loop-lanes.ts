import { Rng } from "../../core/rng.js";
import { type AgentTrace, ownCalls } from "./agent-trace.js";
import { type ReplaySend, TreeReplay } from "./tree-replay.js";

/**
 * AgentX's closed loop: `lanes` lanes, each replaying one session tree at a time and drawing the next
 * when the whole tree (its subagents too) has drained. Traces are drawn from a seeded deck, every trace
 * once per pass. With a warm start, each lane's first tree starts at a random point t* of its session:
 * the session's call just before t* is sent first as a warm-up, and the lanes go on together once every
 * warm-up call has finished (measurement starts then).
 */
export interface ClosedLoopOptions {
  readonly lanes: number;
  readonly seed: number;
  readonly warmStart: boolean;
  readonly idleGapCapS: number;
}

/** A call to send, with where it belongs. */
export interface LaneSend extends ReplaySend {
  readonly lane: number;
  /** the tree's replay: unique per draw */
  readonly treeId: number;
  readonly trace: AgentTrace;
  /**
   * The block-id namespace of this replay (AgentX's per-session cache-bust marker): its own per draw for a
   * trace with `local` ids, one per pass over the corpus for `global` ones (sessions of one pass share ids
   * as recorded; no replay shares blocks with an earlier pass)
   */
  readonly scopeKey: string;
  /** the agent's program: one per agent of each tree replay */
  readonly programId: string;
  /** the program of the agent that spawned it (null: the session) */
  readonly parentProgramId: string | null;
}

/** One tree replay's life, for per-session JCT. */
export interface TreeRun {
  readonly treeId: number;
  readonly lane: number;
  readonly trace: AgentTrace;
  readonly startS: number;
  /** started at a warm start's t*, not from its first call */
  readonly warm: boolean;
  endS: number | null;
}

interface Lane {
  tree: TreeReplay;
  run: TreeRun;
  scopeKey: string;
}

export class ClosedLoopLanes {
  private readonly rng: Rng;
  private readonly deck: number[] = [];
  private readonly draws: number[];
  private readonly lanes: Lane[] = [];
  private readonly inFlight = new Map<LaneSend, { state: Lane; send: ReplaySend }>();
  private nextTreeId = 0;
  private drawing = true;
  /** when every warm-up call had finished; 0 without a warm start */
  private measureFromS: number | null;
  readonly runs: TreeRun[] = [];

  constructor(
    private readonly traces: readonly AgentTrace[],
    private readonly options: ClosedLoopOptions,
    startS = 0,
    /** a tree drained; with `local` ids its cache scope is never sent again */
    private readonly onDrained: (run: TreeRun, scopeKey: string) => void = () => {},
  ) {
    if (traces.length === 0) throw new Error("a closed loop needs at least one session trace");
    if (!(Number.isInteger(options.lanes) && options.lanes >= 1))
      throw new Error(`concurrency must be a positive integer, got ${options.lanes}`);
    this.rng = new Rng(options.seed);
    this.draws = traces.map(() => 0);
    this.measureFromS = options.warmStart ? null : startS;
    for (let lane = 0; lane < options.lanes; lane++)
      this.lanes.push(this.draw(lane, startS, options.warmStart));
  }

  /** When measurement starts: 0 (the start) without a warm start, else once every warm-up call finished. */
  get measurementStartS(): number | null {
    return this.measureFromS;
  }

  /** Lanes stop drawing new trees (the run's end); trees already started go on. */
  stopDrawing(): void {
    this.drawing = false;
  }

  /** Calls due at `nowS`, each in flight until `finished`; a drained tree's lane draws the next tree. */
  due(nowS: number): LaneSend[] {
    const sends: LaneSend[] = [];
    for (let lane = 0; lane < this.lanes.length; lane++) {
      for (let state = this.lanes[lane] as Lane; ; state = this.lanes[lane] as Lane) {
        for (const send of state.tree.due(nowS)) {
          const laneSend: LaneSend = {
            ...send,
            lane,
            treeId: state.run.treeId,
            trace: state.run.trace,
            scopeKey: state.scopeKey,
            programId: `${state.run.treeId}:${send.node.id}`,
            parentProgramId: send.parent === null ? null : `${state.run.treeId}:${send.parent.id}`,
          };
          this.inFlight.set(laneSend, { state, send });
          sends.push(laneSend);
        }
        if (!state.tree.drained || state.run.endS !== null) break;
        state.run.endS = nowS;
        this.onDrained(state.run, state.scopeKey);
        if (!this.drawing) break;
        this.lanes[lane] = this.draw(lane, nowS, false);
      }
    }
    return sends;
  }

  nextDueS(): number | null {
    let next: number | null = null;
    for (const state of this.lanes) {
      const atS = state.tree.nextDueS();
      if (atS !== null && (next === null || atS < next)) next = atS;
    }
    return next;
  }

  /** A call finished (or failed) at `nowS`: its agent goes on at the next `due`. */
  finished(send: LaneSend, nowS: number): void {
    const entry = this.inFlight.get(send);
    if (!entry) throw new Error(`${send.programId}: call ${send.callIndex} was not in flight`);
    this.inFlight.delete(send);
    entry.state.tree.finished(entry.send, nowS);
    if (this.measureFromS === null && this.lanes.every((l) => l.tree.warmedUp)) {
      this.measureFromS = nowS;
      for (const l of this.lanes) l.tree.holdUntil(nowS);
    }
  }

  private draw(lane: number, nowS: number, warm: boolean): Lane {
    if (this.deck.length === 0) this.refillDeck();
    const index = this.deck.pop() as number;
    const trace = this.traces[index] as AgentTrace;
    const pass = this.draws[index] as number;
    this.draws[index] = pass + 1;
    const treeId = this.nextTreeId++;
    const warmStartAtS = warm ? this.rng.next() * lastCallT(trace) : undefined;
    const tree = new TreeReplay(trace, nowS, {
      idleGapCapS: this.options.idleGapCapS,
      ...(warmStartAtS === undefined ? {} : { warmStartAtS }),
    });
    // Until every lane's warm-up call has finished, trees wait (a lane whose warm-up ended its tree too).
    if (this.measureFromS === null) tree.holdUntil(Number.POSITIVE_INFINITY);
    const run: TreeRun = { treeId, lane, trace, startS: nowS, warm, endS: null };
    this.runs.push(run);
    return { tree, run, scopeKey: trace.hashScope === "global" ? `pass-${pass}` : `tree-${treeId}` };
  }

  private refillDeck(): void {
    const order = this.traces.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(this.rng.next() * (i + 1));
      [order[i], order[j]] = [order[j] as number, order[i] as number];
    }
    this.deck.push(...order.reverse());
  }
}

function lastCallT(trace: AgentTrace): number {
  const calls = ownCalls(trace.root);
  return calls[calls.length - 1]?.t ?? 0;
}
