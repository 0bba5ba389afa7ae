import { Program } from "./program.js";

/** Thrown for a request the scheduler can never take (the HTTP layer maps `code` onto a status). */
export class RequestRejectedError extends Error {
  constructor(
    message: string,
    readonly code: "duplicate_request" | "invalid_request" | "prompt_too_long" | "too_many_programs",
  ) {
    super(message);
    this.name = "RequestRejectedError";
  }
}

export const DEFAULT_MAX_PROGRAMS = 65_536;

export interface ProgramRegistryOptions {
  /** programs kept at most: idle ones leave early to make room, then a new program is refused */
  readonly maxPrograms?: number;
  /** an idle program (nothing in flight, no pin) is forgotten this long after its last activity */
  readonly idleTimeoutS?: number;
  /** a program was forgotten (its tool-call history goes with it) */
  readonly onForget: (programId: string) => void;
  /** a program left the table, ended or forgotten (the dashboard's finished programs) */
  readonly onLeave: (program: Program) => void;
}

/**
 * The scheduler's table of programs, bounded: a program is kept while it has requests in flight or a pin,
 * and for a while after its last turn so its next turn finds its statistics; ended ones leave as soon as
 * nothing of them is in flight.
 */
export class ProgramRegistry {
  private readonly programs = new Map<string, Program>();
  private readonly maxPrograms: number;
  private readonly idleTimeoutS: number;
  private readonly onForget: (programId: string) => void;
  private readonly onLeave: (program: Program) => void;
  /** programs created so far: the next one's arrivalOrder */
  private programsSeen = 0;

  constructor(options: ProgramRegistryOptions) {
    this.maxPrograms = options.maxPrograms ?? DEFAULT_MAX_PROGRAMS;
    this.idleTimeoutS = options.idleTimeoutS ?? 3600;
    this.onForget = options.onForget;
    this.onLeave = options.onLeave;
  }

  get size(): number {
    return this.programs.size;
  }

  get(programId: string): Program | undefined {
    return this.programs.get(programId);
  }

  values(): IterableIterator<Program> {
    return this.programs.values();
  }

  /** Whether `program` is the table's program of its id (an ended one may have been replaced or forgotten). */
  holds(program: Program): boolean {
    return this.programs.get(program.id) === program;
  }

  /**
   * The live program a new request of `programId` joins: the existing one, one whose "last" step finished
   * while another of its requests was still in flight (not over yet), or a new one.
   */
  programFor(programId: string, nowS: number): Program {
    const program = this.programs.get(programId);
    if (program?.ended && program.numWaiting + program.numRunning > 0) {
      program.ended = false;
      return program;
    }
    if (program && !program.ended) return program;
    if (!program) this.makeRoom(nowS);
    const fresh = new Program(programId, nowS, this.programsSeen++);
    this.programs.set(programId, fresh);
    return fresh;
  }

  /** An ended program with nothing in flight and no pin leaves the table. */
  forgetIfDone(program: Program): void {
    if (program.ended && program.pin === null && program.numWaiting === 0 && program.numRunning === 0) {
      if (this.holds(program)) {
        this.programs.delete(program.id);
        this.onLeave(program);
      }
    }
  }

  /** Forgets programs idle for the timeout (or for `idleTimeoutS`). */
  forgetIdle(nowS: number, idleTimeoutS = this.idleTimeoutS): void {
    for (const program of this.programs.values()) {
      const idle = program.pin === null && program.numWaiting === 0 && program.numRunning === 0;
      // A program whose requests were all aborted never finished one: idle since it arrived.
      const lastActiveS = program.lastFinishS ?? program.firstArrivalS;
      if (idle && nowS - lastActiveS >= idleTimeoutS) {
        this.programs.delete(program.id);
        this.onForget(program.id);
        this.onLeave(program);
      }
    }
  }

  private makeRoom(nowS: number): void {
    if (this.programs.size < this.maxPrograms) return;
    this.forgetIdle(nowS, 0);
    if (this.programs.size >= this.maxPrograms) {
      throw new RequestRejectedError(
        `${this.programs.size} programs hold requests or pinned KV (the limit); retry when some end`,
        "too_many_programs",
      );
    }
  }
}
