import type { RecorderEvent } from "./events.js";

/** Keys of the authors' vLLM fork `scheduler_timestamps` file (Continuum_Recorder). */
export const forkKeys = {
  arrival: "Request_arrival_time",
  waitingToRunning: "waiting_to_running",
  evictedToRunning: "evicted_to_running",
  preempted: "Request_evicted_from_running_queue_time",
  departure: "Request_departure_time",
  pinned: "pinned_time",
  unpinned: "unpinned_time",
  promptLength: "prompt_length",
  hitLength: "hit_length",
} as const;

export type ForkEntry = Record<string, number>;

/** job_id → that job's entries in recording order. */
export type ForkTimestamps = Record<string, ForkEntry[]>;

/**
 * The fork entry for one event, times shifted by epochOffsetS (the fork stores Unix time).
 * undefined for events the fork never records (evicted, offloaded, reloaded, aborted).
 */
export function toForkEntry(event: RecorderEvent, epochOffsetS: number): ForkEntry | undefined {
  const t = event.timeS + epochOffsetS;
  switch (event.kind) {
    case "arrival":
      return { [forkKeys.arrival]: t };
    case "waiting_to_running":
      return {
        [forkKeys.waitingToRunning]: t,
        [forkKeys.promptLength]: event.promptTokens,
        [forkKeys.hitLength]: event.hitTokens,
      };
    case "evicted_to_running":
      return {
        [forkKeys.evictedToRunning]: t,
        [forkKeys.promptLength]: event.promptTokens,
        [forkKeys.hitLength]: event.hitTokens,
      };
    case "preempted":
      return { [forkKeys.preempted]: t };
    case "departure":
      return { [forkKeys.departure]: t };
    case "pinned":
      return { [forkKeys.pinned]: t };
    case "unpinned":
      return { [forkKeys.unpinned]: t };
    case "evicted":
    case "offloaded":
    case "reloaded":
    case "aborted":
      return undefined;
  }
}
