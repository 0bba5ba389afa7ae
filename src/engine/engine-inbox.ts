import { RequestRejectedError, type Scheduler } from "../core/scheduler.js";
import { type ActiveRequest, type ActiveRequests, failActive } from "./active-request.js";
import { EngineRejection } from "./engine-api.js";

type InboxMessage =
  | { readonly kind: "add"; readonly active: ActiveRequest }
  | { readonly kind: "abort"; readonly requestId: string }
  | { readonly kind: "side_request"; readonly programId: string; readonly requestId: string }
  | { readonly kind: "end_program"; readonly programId: string };

/**
 * What HTTP handlers want of the scheduler (a new request, an abort, a side request, a program's end), kept in order until
 * the step loop delivers it: in serving, as in simulation, the scheduler changes only inside the loop.
 */
export class EngineInbox {
  private messages: InboxMessage[] = [];
  private requestsPosted = 0;
  private readonly endsPosted = new Set<string>();

  /** `wake` rouses an idle loop */
  constructor(private readonly wake: () => void) {}

  /** requests posted and not yet delivered (they count as waiting) */
  get numRequests(): number {
    return this.requestsPosted;
  }

  get isEmpty(): boolean {
    return this.messages.length === 0;
  }

  hasEndPosted(programId: string): boolean {
    return this.endsPosted.has(programId);
  }

  postRequest(active: ActiveRequest): void {
    this.requestsPosted++;
    this.post({ kind: "add", active });
  }

  postAbort(requestId: string): void {
    this.post({ kind: "abort", requestId });
  }

  postSideRequest(programId: string, requestId: string): void {
    this.post({ kind: "side_request", programId, requestId });
  }

  postEnd(programId: string): void {
    this.endsPosted.add(programId);
    this.post({ kind: "end_program", programId });
  }

  /**
   * Hands everything posted to the scheduler, in order. A request whose client already left never reaches
   * it; one the scheduler refuses (its program table full) fails its stream with the reason.
   */
  deliver(scheduler: Scheduler, table: ActiveRequests): void {
    if (this.messages.length === 0) return;
    const messages = this.messages;
    this.messages = [];
    for (const message of messages) {
      if (message.kind === "add") {
        this.requestsPosted--;
        const active = message.active;
        if (active.done) continue;
        try {
          active.request = scheduler.addRequest(active.requestSpec);
        } catch (error) {
          const rejection =
            error instanceof RequestRejectedError ? new EngineRejection(error.message, error.code) : error;
          failActive(active, table, rejection);
        }
      } else if (message.kind === "abort") {
        scheduler.abort(message.requestId);
      } else if (message.kind === "side_request") {
        scheduler.markSideRequest(message.programId, message.requestId);
      } else {
        this.endsPosted.delete(message.programId);
        scheduler.endProgramById(message.programId);
      }
    }
  }

  private post(message: InboxMessage): void {
    this.messages.push(message);
    this.wake();
  }
}
