import type { GenerateEvent } from "../../engine/engine-api.js";

type DoneEvent = Extract<GenerateEvent, { type: "done" }>;

/**
 * How a request's choices ended, for vLLM's `vllm:request_max_num_generation_tokens`: observed once per
 * request, when its last choice ends, with the most tokens a choice generated (choices whose client left
 * count only if they finished).
 */
export class ChoiceTally {
  private open: number;
  private mostTokens: number | null = null;

  constructor(choices: number) {
    this.open = choices;
  }

  /** One choice ended (`done` null: its client left first); the request's most generated tokens once all did. */
  settle(done: DoneEvent | null): number | null {
    if (done !== null) this.mostTokens = Math.max(this.mostTokens ?? 0, done.usage.completionTokens);
    this.open -= 1;
    return this.open === 0 ? this.mostTokens : null;
  }
}
