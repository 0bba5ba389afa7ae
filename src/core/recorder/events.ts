/** Per-program scheduling events. Times are seconds on the scheduler's clock. */
interface EventBase {
  programId: string;
  requestId: string;
  timeS: number;
}

export type UnpinReason = "expired" | "reused" | "last_step" | "victim" | "aborted";
export type StorageTier = "cpu" | "disk";

export type RecorderEvent =
  /**
   * `reusableTokens`: the leading prompt tokens identical to its program's previous finished turn's prompt
   * + output, in whole KV blocks (what a KV cache could reuse, whether or not it still held it); absent where
   * there is no previous turn (a first turn, an anonymous request) and in logs written before arrivals
   * carried it. A side request is known as one only later: it is measured like a turn.
   */
  | (EventBase & { kind: "arrival"; reusableTokens?: number })
  | (EventBase & { kind: "waiting_to_running"; promptTokens: number; hitTokens: number })
  /** Re-admitted after preemption. */
  | (EventBase & { kind: "evicted_to_running"; promptTokens: number; hitTokens: number })
  | (EventBase & { kind: "preempted" })
  /**
   * `tool`: the tool its output called, as the scheduler read it (absent: none read, or not a turn); `side`:
   * a side request of its program (a title, a summary), no turn of it
   */
  | (EventBase & { kind: "departure"; outputTokens: number; tool?: string; side?: true })
  | (EventBase & { kind: "pinned"; ttlS: number })
  | (EventBase & { kind: "unpinned"; reason: UnpinReason })
  /** Pinned or cached KV dropped. */
  | (EventBase & { kind: "evicted"; tokens: number })
  | (EventBase & { kind: "offloaded"; tokens: number; tier: StorageTier })
  | (EventBase & { kind: "reloaded"; tokens: number; tier: StorageTier })
  | (EventBase & { kind: "aborted" });

export type RecorderEventKind = RecorderEvent["kind"];

const unpinReasons: ReadonlySet<string> = new Set<UnpinReason>([
  "expired",
  "reused",
  "last_step",
  "victim",
  "aborted",
]);
const storageTiers: ReadonlySet<string> = new Set<StorageTier>(["cpu", "disk"]);

/**
 * One compact JSON object (no newline) in the log's on-disk vocabulary (the fork's field names).
 * Built by hand rather than JSON.stringify of a fresh object: this runs once per scheduling event.
 */
export function eventToLine(event: RecorderEvent): string {
  const head = `{"t":${event.timeS},"program":${JSON.stringify(event.programId)},"request":${JSON.stringify(event.requestId)},"event":"${event.kind}"`;
  switch (event.kind) {
    case "waiting_to_running":
    case "evicted_to_running":
      return `${head},"prompt_length":${event.promptTokens},"hit_length":${event.hitTokens}}`;
    case "departure":
      return `${head},"output_length":${event.outputTokens}${event.tool === undefined ? "" : `,"tool":${JSON.stringify(event.tool)}`}${event.side ? `,"side":true` : ""}}`;
    case "pinned":
      return `${head},"ttl_s":${event.ttlS}}`;
    case "unpinned":
      return `${head},"reason":"${event.reason}"}`;
    case "evicted":
      return `${head},"tokens":${event.tokens}}`;
    case "offloaded":
    case "reloaded":
      return `${head},"tokens":${event.tokens},"tier":"${event.tier}"}`;
    case "arrival":
      return event.reusableTokens === undefined
        ? `${head}}`
        : `${head},"reusable_length":${event.reusableTokens}}`;
    case "preempted":
    case "aborted":
      return `${head}}`;
  }
}

/** Inverse of eventToLine. Throws "invalid recorder event: ..." when the line is not a valid event. */
export function eventFromLine(line: string): RecorderEvent {
  const row: unknown = JSON.parse(line);
  if (typeof row !== "object" || row === null || Array.isArray(row)) invalid("not a JSON object");
  const fields = row as Record<string, unknown>;
  const programId = text(fields, "program");
  const requestId = text(fields, "request");
  const timeS = finite(fields, "t");
  const kind = fields["event"];
  switch (kind) {
    case "waiting_to_running":
    case "evicted_to_running": {
      const promptTokens = tokenCount(fields, "prompt_length");
      const hitTokens = tokenCount(fields, "hit_length");
      return { programId, requestId, timeS, kind, promptTokens, hitTokens };
    }
    case "departure": {
      const outputTokens = tokenCount(fields, "output_length");
      // logs written before these fields have neither
      return {
        programId,
        requestId,
        timeS,
        kind,
        outputTokens,
        ...(fields["tool"] === undefined ? {} : { tool: text(fields, "tool") }),
        ...(fields["side"] === true ? { side: true as const } : {}),
      };
    }
    case "pinned": {
      const ttlS = finite(fields, "ttl_s");
      if (ttlS < 0) invalid(`ttl_s is negative (${ttlS})`);
      return { programId, requestId, timeS, kind, ttlS };
    }
    case "unpinned": {
      const reason = oneOf(fields, "reason", unpinReasons) as UnpinReason;
      return { programId, requestId, timeS, kind, reason };
    }
    case "evicted":
      return { programId, requestId, timeS, kind, tokens: tokenCount(fields, "tokens") };
    case "offloaded":
    case "reloaded": {
      const tokens = tokenCount(fields, "tokens");
      const tier = oneOf(fields, "tier", storageTiers) as StorageTier;
      return { programId, requestId, timeS, kind, tokens, tier };
    }
    case "arrival":
      // logs written before arrivals carried it have none
      return fields["reusable_length"] === undefined
        ? { programId, requestId, timeS, kind }
        : { programId, requestId, timeS, kind, reusableTokens: tokenCount(fields, "reusable_length") };
    case "preempted":
    case "aborted":
      return { programId, requestId, timeS, kind };
    default:
      return invalid(`unknown event ${JSON.stringify(kind)}`);
  }
}

function invalid(detail: string): never {
  throw new Error(`invalid recorder event: ${detail}`);
}

function text(fields: Record<string, unknown>, key: string): string {
  const value = fields[key];
  return typeof value === "string" ? value : invalid(`${key} must be a string`);
}

function finite(fields: Record<string, unknown>, key: string): number {
  const value = fields[key];
  return typeof value === "number" && Number.isFinite(value) ? value : invalid(`${key} must be a number`);
}

function tokenCount(fields: Record<string, unknown>, key: string): number {
  const value = fields[key];
  return Number.isSafeInteger(value) && (value as number) >= 0
    ? (value as number)
    : invalid(`${key} must be a non-negative integer`);
}

function oneOf(fields: Record<string, unknown>, key: string, allowed: ReadonlySet<string>): string {
  const value = fields[key];
  return typeof value === "string" && allowed.has(value)
    ? value
    : invalid(`${key} must be one of ${[...allowed].join(", ")}`);
}
