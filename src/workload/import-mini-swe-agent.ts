import { z } from "zod";
import { parseToolName } from "../core/tools/parse-tool-call.js";
import {
  type ChatMessage,
  callsToProgram,
  FALLBACK_TOOL_S,
  type ImportOptions,
  type ModelCall,
  messageBody,
} from "./conversation.js";
import { formatIssues } from "./format-issues.js";
import { quantileSorted } from "./stats.js";
import { tokensFromChars } from "./tokens.js";
import type { TraceProgram } from "./trace.js";

/** Decode speed assumed when taking generation time out of the gap between two calls. */
export const ASSUMED_DECODE_TOKENS_PER_S = 60;

const responseSchema = z.looseObject({
  created: z.number().nullish(),
  usage: z.looseObject({ completion_tokens: z.number().nullish() }).nullish(),
});

const messageSchema = z.looseObject({
  role: z.string(),
  content: z.unknown().optional(),
  extra: z.looseObject({ response: responseSchema.nullish() }).nullish(),
});

const trajSchema = z.looseObject({
  messages: z.array(messageSchema).min(1),
  instance_id: z.string().nullish(),
  info: z.looseObject({ mini_version: z.string().nullish() }).nullish(),
});

type Message = z.infer<typeof messageSchema>;

/**
 * mini-swe-agent records no tool times, only each response's `created` second. The gap to the next
 * call spans this call's generation (completion tokens at ASSUMED_DECODE_TOKENS_PER_S), a per-call
 * overhead (queueing, prefill, agent bookkeeping) and the tool. The overhead is taken as the median
 * leftover over the program, since most agent tools are fast; a tool gets what a call leaves beyond
 * that, and at least FALLBACK_TOOL_S. Calls without timestamps get FALLBACK_TOOL_S.
 */
function estimateToolTimesS(responses: readonly Message[]): number[] {
  const leftovers = responses.map((message, i) => {
    const created = message.extra?.response?.created;
    const nextCreated = responses[i + 1]?.extra?.response?.created;
    if (created == null || nextCreated == null) return null;
    const completion =
      message.extra?.response?.usage?.completion_tokens ?? tokensFromChars(messageBody(message).length);
    return nextCreated - created - completion / ASSUMED_DECODE_TOKENS_PER_S;
  });
  const known = leftovers.filter((s): s is number => s !== null).sort((a, b) => a - b);
  const overheadS = quantileSorted(known, 0.5);
  return leftovers.map((s) => (s === null ? FALLBACK_TOOL_S : Math.max(FALLBACK_TOOL_S, s - overheadS)));
}

/**
 * A mini-swe-agent `.traj.json` (parsed JSON) as a trace program: one turn per assistant message, whose
 * prompt is every message before it. Tool: the head command of the response's ```bash block.
 */
export function importMiniSweAgentTraj(data: unknown, options: ImportOptions = {}): TraceProgram {
  const parsed = trajSchema.safeParse(data);
  if (!parsed.success)
    throw new Error(`not a mini-swe-agent trajectory: ${formatIssues(parsed.error.issues)}`);
  const { messages, instance_id, info } = parsed.data;
  const assistantAt = messages.flatMap((m, at) => (m.role === "assistant" ? [at] : []));
  if (assistantAt.length === 0) throw new Error("mini-swe-agent trajectory has no assistant message");
  const responses = assistantAt.map((at) => messages[at]!);
  const toolTimesS = estimateToolTimesS(responses);
  const calls: ModelCall[] = assistantAt.map((at, i) => ({
    prompt: messages.slice(0, at) as ChatMessage[],
    response: responses[i]!,
    tool: parseToolName(messageBody(responses[i]!)),
    toolS: toolTimesS[i]!,
  }));
  const version = info?.mini_version;
  const source = options.source ?? (version ? `mini-swe-agent ${version}` : "mini-swe-agent");
  return callsToProgram(options.id ?? instance_id ?? "mini-swe-agent", source, calls);
}
