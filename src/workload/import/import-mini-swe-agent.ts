import { z } from "zod";
import { parseToolName } from "../../tool-calls/parse-tool-call.js";
import { headCommand } from "../../tool-calls/shell-head-command.js";
import { formatIssues } from "../format-issues.js";
import { quantileSorted } from "../stats.js";
import { tokensFromChars } from "../tokens.js";
import type { TraceProgram } from "../trace.js";
import {
  type ChatMessage,
  callsToProgram,
  FALLBACK_TOOL_S,
  type ImportOptions,
  type ModelCall,
  messageBody,
} from "./conversation.js";

/** Decode speed assumed when taking generation time out of the gap between two calls. */
export const ASSUMED_DECODE_TOKENS_PER_S = 60;

const responseSchema = z.looseObject({
  created: z.number().nullish(),
  usage: z.looseObject({ completion_tokens: z.number().nullish() }).nullish(),
});

const messageSchema = z.looseObject({
  role: z.string(),
  content: z.unknown().optional(),
  extra: z
    .looseObject({
      response: responseSchema.nullish(),
      /** mini-swe-agent 2.x: the commands of a tool-calling response */
      actions: z.array(z.looseObject({ command: z.string().nullish() })).nullish(),
      /** mini-swe-agent 2.x: local time a response came back, or an observation's command finished */
      timestamp: z.number().nullish(),
    })
    .nullish(),
});

const trajSchema = z.looseObject({
  messages: z.array(messageSchema).min(1),
  instance_id: z.string().nullish(),
  info: z.looseObject({ mini_version: z.string().nullish() }).nullish(),
});

type Message = z.infer<typeof messageSchema>;

/**
 * mini-swe-agent 2.x stamps each response with the local time it came back and each observation with the
 * time its command finished (`extra.timestamp`, both time.time() on the agent's machine): a tool's time is
 * its last observation's stamp less its response's, the commands' run plus the agent's own bookkeeping.
 * null where either stamp is missing.
 */
function measuredToolTimesS(messages: readonly Message[], assistantAt: readonly number[]): (number | null)[] {
  return assistantAt.map((at) => {
    const respondedS = messages[at]!.extra?.timestamp;
    let finishedS: number | null = null;
    for (let i = at + 1; i < messages.length && messages[i]!.role !== "assistant"; i++) {
      finishedS = messages[i]!.extra?.timestamp ?? finishedS;
    }
    if (respondedS == null || finishedS === null) return null;
    return Math.max(0, finishedS - respondedS);
  });
}

/**
 * Older mini-swe-agent versions record no tool times, only each response's `created` second. The gap to the next
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

/** The head command of a response: its first tool-call action (2.x), else its ```bash block. */
function toolOf(response: Message): string | null {
  const command = response.extra?.actions?.[0]?.command;
  if (typeof command === "string") return headCommand(command);
  return parseToolName(messageBody(response));
}

/**
 * A mini-swe-agent `.traj.json` (parsed JSON) as a trace program: one turn per assistant message, whose
 * prompt is every message before it. Tool: the head command the response ran. Tool time: measured from
 * the 2.x timestamps where every turn has them, else estimated from the responses' `created` seconds.
 */
export function importMiniSweAgentTraj(data: unknown, options: ImportOptions = {}): TraceProgram {
  const parsed = trajSchema.safeParse(data);
  if (!parsed.success)
    throw new Error(`not a mini-swe-agent trajectory: ${formatIssues(parsed.error.issues)}`);
  const { messages, instance_id, info } = parsed.data;
  const assistantAt = messages.flatMap((m, at) => (m.role === "assistant" ? [at] : []));
  if (assistantAt.length === 0) throw new Error("mini-swe-agent trajectory has no assistant message");
  const responses = assistantAt.map((at) => messages[at]!);
  const measured = measuredToolTimesS(messages, assistantAt);
  const toolTimesS = measured.slice(0, -1).every((s) => s !== null)
    ? measured.map((s) => s ?? FALLBACK_TOOL_S)
    : estimateToolTimesS(responses);
  const calls: ModelCall[] = assistantAt.map((at, i) => ({
    prompt: messages.slice(0, at) as ChatMessage[],
    response: responses[i]!,
    tool: toolOf(responses[i]!),
    toolS: toolTimesS[i]!,
  }));
  const version = info?.mini_version;
  const source = options.source ?? (version ? `mini-swe-agent ${version}` : "mini-swe-agent");
  return callsToProgram(options.id ?? instance_id ?? "mini-swe-agent", source, calls);
}
