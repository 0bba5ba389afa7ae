import { z } from "zod";
import { formatIssues } from "../format-issues.js";
import type { AgentCall, AgentTrace } from "./agent-trace.js";

/** Tokens per hash id in Mooncake's traces (the paper's block, arXiv 2407.00079); `--block-size` overrides. */
export const MOONCAKE_BLOCK_SIZE = 512;

const lineSchema = z.looseObject({
  timestamp: z.number().nonnegative().refine(Number.isFinite, "must be finite").optional(),
  input_length: z.int().nonnegative(),
  output_length: z.int().nonnegative(),
  hash_ids: z.array(z.int().nonnegative()).optional(),
  session_id: z.union([z.string().min(1), z.int()]).optional(),
  delay: z.number().nonnegative().refine(Number.isFinite, "must be finite").optional(),
});

const KNOWN = new Set(["timestamp", "input_length", "output_length", "hash_ids", "session_id", "delay"]);

/** Is this parsed JSON line a Mooncake request (by its keys)? */
export function looksLikeMooncakeLine(json: unknown): boolean {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return false;
  const o = json as Record<string, unknown>;
  return "input_length" in o && ("hash_ids" in o || "timestamp" in o || "output_length" in o);
}

export interface MooncakeParse {
  readonly traces: AgentTrace[];
  /** `<origin>:<line>: <field>: <message>`, one per session left out */
  readonly problems: string[];
}

interface PendingCall {
  readonly line: number;
  readonly timestampMs: number | undefined;
  readonly delayMs: number | undefined;
  readonly call: Omit<AgentCall, "t" | "thinkTimeS">;
}

/**
 * Mooncake JSONL (`timestamp` ms, `input_length`, `output_length`, `hash_ids`; AIPerf's optional
 * `session_id` and `delay` ms): lines sharing a `session_id` are the turns of one session, in file order;
 * a line without one is a session of its own. Ids are global (the corpus shares them), one per
 * `blockSize` tokens. A turn is sent `delay` after its session's previous one ended, or at its
 * `timestamp`'s offset from the session's first (end-to-start gaps are not recorded there: 0). A bad line
 * takes its session out, named in `problems`.
 */
export function parseMooncakeJsonl(
  text: string,
  origin: string,
  blockSize = MOONCAKE_BLOCK_SIZE,
): MooncakeParse {
  const sessions = new Map<string, PendingCall[]>();
  const broken = new Map<string, string>();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "") continue;
    const where = `${origin}:${i + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (error) {
      broken.set(`line-${i + 1}`, `${where}: invalid JSON (${(error as Error).message})`);
      continue;
    }
    const rawSession = (json as { session_id?: unknown } | null)?.session_id;
    const sessionKey =
      typeof rawSession === "string" || typeof rawSession === "number" ? String(rawSession) : `line-${i + 1}`;
    const parsed = lineSchema.safeParse(json);
    if (!parsed.success) {
      if (!broken.has(sessionKey)) broken.set(sessionKey, `${where}: ${formatIssues(parsed.error.issues)}`);
      continue;
    }
    const raw = parsed.data;
    const extra: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(raw)) if (!KNOWN.has(key)) extra[key] = value;
    const pending: PendingCall = {
      line: i + 1,
      timestampMs: raw.timestamp,
      delayMs: raw.delay,
      call: {
        kind: "call",
        input: raw.input_length,
        output: raw.output_length,
        hashIds: raw.hash_ids ?? [],
        apiTimeS: null,
        stop: "",
        model: null,
        streaming: false,
        extra,
      },
    };
    const calls = sessions.get(sessionKey);
    if (calls) calls.push(pending);
    else sessions.set(sessionKey, [pending]);
  }
  const traces: AgentTrace[] = [];
  for (const [id, pending] of sessions) {
    if (broken.has(id)) continue;
    traces.push(sessionTrace(id, pending, blockSize));
  }
  const problems = [...broken.entries()].map(([id, problem]) =>
    id.startsWith("line-") ? problem : `${problem} (session ${id} left out)`,
  );
  return { traces, problems };
}

function sessionTrace(id: string, pending: readonly PendingCall[], blockSize: number): AgentTrace {
  const firstMs = pending[0]?.timestampMs ?? 0;
  let cumulativeS = 0;
  const calls = pending.map((p, index): AgentCall => {
    const delayS = (p.delayMs ?? 0) / 1000;
    cumulativeS += index === 0 ? 0 : delayS;
    const t = p.timestampMs === undefined ? cumulativeS : Math.max(0, (p.timestampMs - firstMs) / 1000);
    return { ...p.call, t, thinkTimeS: index === 0 ? 0 : delayS };
  });
  return {
    id,
    format: "mooncake",
    blockSize,
    hashScope: "global",
    root: {
      id,
      agentId: null,
      subagentType: null,
      status: null,
      t: 0,
      models: [],
      toolTokens: 0,
      systemTokens: 0,
      steps: calls,
      extra: {},
    },
    extra: {},
  };
}
