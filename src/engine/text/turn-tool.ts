/**
 * The tool a finished turn's output calls, read for the scheduler (a pin's TTL is priced per tool); the
 * scheduler is told the name and never reads model text.
 */
import type { SchedulingPolicy } from "../../core/policy.js";
import { parseForkToolName, parseToolName } from "../../tool-calls/parse-tool-call.js";
import type { GenerateRequest } from "../engine-api.js";

/**
 * How a request's output is read: a policy of the authors' fork reads the first word of the bash block as
 * its fork does; otherwise the server's reader of the model's call format, else the general parser. Null
 * when the client named the turn's tool (its word wins).
 */
export function turnToolReader(
  parser: SchedulingPolicy["toolParser"],
  spec: Pick<GenerateRequest, "toolHint" | "toolNamer">,
): ((output: string) => string | null) | null {
  if (spec.toolHint) return null;
  if (parser === "fork") return parseForkToolName;
  const namer = spec.toolNamer;
  return namer ? (output) => namer(output) ?? parseToolName(output) : parseToolName;
}
