import { z } from "zod";
import { headCommand } from "../../tool-calls/shell-head-command.js";
import { formatIssues } from "../format-issues.js";
import type { TraceProgram } from "../trace.js";
import {
  type ChatMessage,
  callsToProgram,
  FALLBACK_TOOL_S,
  type ImportOptions,
  type ModelCall,
} from "./conversation.js";

const messageSchema = z.looseObject({
  role: z.string(),
  content: z.unknown().optional(),
  tool_calls: z.unknown().optional(),
  /** demonstrations older SWE-agent versions put into the history; not calls of this run */
  is_demo: z.boolean().nullish(),
});

const stepSchema = z.looseObject({
  action: z.string().nullish(),
  response: z.string().nullish(),
  execution_time: z.number().nonnegative().nullish(),
  /** later SWE-agent versions: exactly the messages sent for this step's call */
  query: z.array(messageSchema).nullish(),
  /** SWE-agent 1.0: the history (after history processors) once this step's result was added */
  messages: z.array(messageSchema).nullish(),
});

const trajSchema = z.looseObject({
  trajectory: z.array(stepSchema).min(1),
  history: z.array(messageSchema).nullish(),
  environment: z.string().nullish(),
  info: z.looseObject({ swe_agent_version: z.string().nullish() }).nullish(),
});

type Step = z.infer<typeof stepSchema>;
type Message = z.infer<typeof messageSchema>;

function lastAssistantIndex(messages: readonly ChatMessage[]): number {
  return messages.findLastIndex((m) => m.role === "assistant");
}

/**
 * Prompt and response of each step's call. With `query` the prompt is recorded. With `messages`, step
 * i's list is the processed history after step i, which is exactly what call i + 1 was sent: history
 * processors (such as eliding old observations) run on each query, so call i + 1's prompt is not step
 * i + 1's list minus its last exchange. Without either, the raw `history` is cut at each assistant
 * message (no elision is visible there).
 */
function modelCallPrompts(steps: readonly Step[], history: readonly Message[] | null | undefined) {
  return steps.map((step, i): { prompt: readonly ChatMessage[]; response: ChatMessage } => {
    const fallbackResponse: ChatMessage = { role: "assistant", content: step.response ?? "" };
    if (step.query) return { prompt: step.query, response: fallbackResponse };
    const messages = step.messages;
    if (messages) {
      const at = lastAssistantIndex(messages);
      const response = at >= 0 ? messages[at]! : fallbackResponse;
      const previous = i > 0 ? steps[i - 1]!.messages : null;
      return { prompt: previous ?? messages.slice(0, Math.max(0, at)), response };
    }
    if (history) {
      const assistantAt = history.flatMap((m, at) => (m.role === "assistant" && !m.is_demo ? [at] : []));
      const at = assistantAt[i];
      if (at !== undefined) return { prompt: history.slice(0, at), response: history[at]! };
    }
    throw new Error(`step ${i} has neither query nor messages, and history has no assistant message for it`);
  });
}

/**
 * A SWE-agent `.traj` (parsed JSON) as a trace program, one turn per trajectory step (model call).
 * Tool: head command of the step's `action`. Tool time: the step's `execution_time`, or
 * FALLBACK_TOOL_S when the file has none.
 */
export function importSweAgentTraj(data: unknown, options: ImportOptions = {}): TraceProgram {
  const parsed = trajSchema.safeParse(data);
  if (!parsed.success) throw new Error(`not a SWE-agent trajectory: ${formatIssues(parsed.error.issues)}`);
  const traj = parsed.data;
  const prompts = modelCallPrompts(traj.trajectory, traj.history);
  const calls: ModelCall[] = traj.trajectory.map((step, i) => ({
    ...prompts[i]!,
    tool: headCommand(step.action ?? ""),
    toolS: step.execution_time ?? FALLBACK_TOOL_S,
  }));
  const version = traj.info?.swe_agent_version;
  const source = options.source ?? (version ? `swe-agent ${version}` : "swe-agent");
  return callsToProgram(options.id ?? traj.environment ?? "swe-agent", source, calls);
}
