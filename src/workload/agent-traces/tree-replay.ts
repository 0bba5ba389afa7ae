import type { AgentCall, AgentNode, AgentSpawn, AgentTrace } from "./agent-trace.js";
import { ownCalls } from "./agent-trace.js";

/**
 * The replay of one session tree as AgentX replays it (docs/workloads.md, "Closed-loop replay"): each agent
 * (the session, each subagent) sends its calls one after another, a call `think_time` after the agent's
 * previous call ended; a subagent starts its recorded offset after the parent call before it was sent;
 * a parent call whose recorded time is at or after a subagent's recorded end waits for that subagent
 * (a join), and then for the gap it recorded after that end; background subagents gate nothing. Every
 * recorded gap is capped at `idleGapCapS`. Clock-free: the caller says what time it is.
 */
export interface TreeReplayOptions {
  /** cap on every recorded gap the replay waits out (think times, spawn offsets, gaps after joins) */
  readonly idleGapCapS: number;
  /**
   * Start at a point t* of the session (AgentX's warm start): the session's last call sent at or before t*
   * is sent first as a warm-up call, and what came before it (subagents spawned earlier included) is skipped
   */
  readonly warmStartAtS?: number;
}

/** A call the replay sends now. */
export interface ReplaySend {
  readonly node: AgentNode;
  /** the agent that spawned this one (null: the session) */
  readonly parent: AgentNode | null;
  readonly call: AgentCall;
  /** its place among its agent's own calls */
  readonly callIndex: number;
  /** sent to prime the cache before measurement (a warm start's first call) */
  readonly warmup: boolean;
  /** when the replay wanted it sent */
  readonly dueS: number;
}

interface ChildRun {
  readonly spawn: AgentSpawn;
  readonly startAtS: number;
  run: NodeRun | null;
  joined: boolean;
}

class NodeRun {
  stepIndex = 0;
  callsSent = 0;
  inFlight: ReplaySend | null = null;
  /** replay time the agent's latest call ended (its start before any) */
  lastEndS: number;
  /** the latest call sent: its recorded time and when it was sent, the anchor of spawns after it */
  anchorT: number;
  anchorSendS: number;
  readonly children: ChildRun[] = [];
  done = false;
  endS = 0;

  constructor(
    readonly node: AgentNode,
    readonly startS: number,
    readonly parent: AgentNode | null,
  ) {
    this.lastEndS = startS;
    this.anchorT = node.t;
    this.anchorSendS = startS;
  }
}

const capped = (gapS: number, capS: number) => Math.min(Math.max(0, gapS), capS);

export class TreeReplay {
  private readonly runs: NodeRun[] = [];
  /** nothing is sent before this (a closed loop holds trees until every lane's warm-up call finished) */
  private notBeforeS = 0;
  private warmup: { finished: boolean } | null = null;

  constructor(
    readonly trace: AgentTrace,
    readonly startS: number,
    private readonly options: TreeReplayOptions,
  ) {
    const root = new NodeRun(trace.root, startS, null);
    this.runs.push(root);
    if (options.warmStartAtS !== undefined) this.skipToWarmStart(root, options.warmStartAtS);
  }

  /** Nothing of the tree is sent before `atS`. */
  holdUntil(atS: number): void {
    this.notBeforeS = atS;
  }

  /** The warm-up call was sent and has finished (or there was none). */
  get warmedUp(): boolean {
    return this.warmup === null || this.warmup.finished;
  }

  /** Every agent of the tree is done, background subagents too. */
  get drained(): boolean {
    return this.runs.every((run) => run.done) && this.runs.every((run) => run.children.every((c) => c.run));
  }

  /**
   * Calls due at `nowS`, each now in flight until `finished`. Starts the subagents due, and marks agents
   * done that have nothing left.
   */
  due(nowS: number): ReplaySend[] {
    const sends: ReplaySend[] = [];
    for (let progressed = true; progressed; ) {
      progressed = false;
      for (const run of [...this.runs]) {
        if (this.advance(run, nowS, sends)) progressed = true;
      }
    }
    return sends;
  }

  /** When the next call is due or subagent starts (null: nothing until a call in flight finishes). */
  nextDueS(): number | null {
    let next: number | null = null;
    const consider = (atS: number | null) => {
      if (atS !== null && (next === null || atS < next)) next = atS;
    };
    for (const run of this.runs) {
      for (const child of run.children) if (!child.run) consider(Math.max(child.startAtS, this.notBeforeS));
      consider(this.nextCallDueS(run));
    }
    return next;
  }

  /** The call `send` finished (or failed: a failure releases what waits on it like a completion). */
  finished(send: ReplaySend, nowS: number): void {
    const run = this.runs.find((r) => r.inFlight === send);
    if (!run) throw new Error(`${send.node.id}: call ${send.callIndex} was not in flight`);
    run.inFlight = null;
    run.lastEndS = nowS;
    if (send.warmup && this.warmup) this.warmup.finished = true;
  }

  private skipToWarmStart(root: NodeRun, atS: number): void {
    const calls = ownCalls(root.node);
    let index = 0;
    for (let i = 0; i < calls.length; i++) if ((calls[i] as AgentCall).t <= atS) index = i;
    const warmCall = calls[index] as AgentCall;
    // Skip the steps before the warm-up call, subagents spawned before it with them.
    let stepIndex = 0;
    let seenCalls = 0;
    for (; stepIndex < root.node.steps.length; stepIndex++) {
      const step = root.node.steps[stepIndex];
      if (step?.kind === "call") {
        if (seenCalls === index) break;
        seenCalls++;
      }
    }
    root.stepIndex = stepIndex;
    root.callsSent = index;
    root.anchorT = warmCall.t;
    this.warmup = { finished: false };
  }

  /** Runs one agent forward at `nowS`; true when something changed. */
  private advance(run: NodeRun, nowS: number, sends: ReplaySend[]): boolean {
    let changed = false;
    for (const child of run.children) {
      if (!child.run && Math.max(child.startAtS, this.notBeforeS) <= nowS) {
        child.run = new NodeRun(child.spawn.agent, Math.max(child.startAtS, this.notBeforeS), run.node);
        this.runs.push(child.run);
        changed = true;
      }
    }
    if (run.done) return changed;
    for (;;) {
      const step = run.node.steps[run.stepIndex];
      if (step === undefined) {
        if (run.inFlight === null && this.childrenDone(run)) {
          run.done = true;
          run.endS = Math.max(run.lastEndS, ...run.children.map((c) => c.run?.endS ?? 0));
          return true;
        }
        return changed;
      }
      if (step.kind === "subagent") {
        run.children.push({
          spawn: step,
          startAtS: run.anchorSendS + capped(step.agent.t - run.anchorT, this.options.idleGapCapS),
          run: null,
          joined: false,
        });
        run.stepIndex++;
        changed = true;
        continue;
      }
      const dueS = this.nextCallDueS(run);
      if (dueS === null || dueS > nowS) return changed;
      const warmup = this.warmup !== null && !this.warmup.finished && run === this.runs[0];
      const send: ReplaySend = {
        node: run.node,
        parent: run.parent,
        call: step,
        callIndex: run.callsSent,
        warmup,
        dueS,
      };
      for (const child of this.gating(run, step)) child.joined = true;
      run.inFlight = send;
      run.anchorT = step.t;
      run.anchorSendS = nowS;
      run.callsSent++;
      run.stepIndex++;
      sends.push(send);
      return true;
    }
  }

  /** When the agent's next call may be sent, or null while it waits on a call or a subagent. */
  private nextCallDueS(run: NodeRun): number | null {
    if (run.done || run.inFlight !== null) return null;
    const step = run.node.steps[run.stepIndex];
    if (step === undefined || step.kind !== "call") return null;
    const cap = this.options.idleGapCapS;
    if (this.warmup !== null && !this.warmup.finished && run === this.runs[0]) return this.startS;
    let dueS =
      run.callsSent === 0
        ? run.startS + capped(step.t - run.node.t, cap)
        : run.lastEndS + capped(step.thinkTimeS, cap);
    for (const child of this.gating(run, step)) {
      if (!child.run?.done) return null;
      dueS = Math.max(dueS, child.run.endS + capped(step.t - child.spawn.recordedEndS, cap));
    }
    return Math.max(dueS, this.notBeforeS);
  }

  /** Subagents this call joins: spawned before it, not in the background, recorded as ended by its time. */
  private gating(run: NodeRun, call: AgentCall): ChildRun[] {
    return run.children.filter((c) => !c.joined && !c.spawn.background && c.spawn.recordedEndS <= call.t);
  }

  private childrenDone(run: NodeRun): boolean {
    return run.children.every((c) => c.spawn.background || c.run?.done === true);
  }
}
