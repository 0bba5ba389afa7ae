/**
 * OpenAI chat messages -> the engine's plain turns. The engine's template only knows role + text, so
 * the server writes the tool list into the system turn (a Hermes-style `<tools>` block, as the
 * built-in model's ChatML template does), assistant tool calls as `<tool_call>` blocks, and tool
 * results as turns of role "tool".
 */
import type { ChatTurn } from "../../engine/engine-api.js";
import { ApiError } from "../errors.js";
import type { ChatMessageInput, ToolInput } from "../schemas.js";
import { refusedMedia } from "./media-notes.js";

type Content = ChatMessageInput["content"];

export function contentText(content: Content, param: string): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .map((part, i) => {
      if (part.type !== "text" || typeof part.text !== "string") {
        throw ApiError.badRequest(
          refusedMedia("chat", part.type) ??
            `content part of type ${JSON.stringify(part.type)} is not supported (text only)`,
          `${param}[${i}]`,
        );
      }
      return part.text;
    })
    .join("");
}

/** A tool as listed to the model: OpenAI's function definition. */
function toolLine(tool: ToolInput): string {
  const fn: Record<string, unknown> = { name: tool.function.name };
  if (tool.function.description) fn["description"] = tool.function.description;
  fn["parameters"] = tool.function.parameters ?? { type: "object", properties: {} };
  return JSON.stringify({ type: "function", function: fn });
}

export function toolsBlock(tools: readonly ToolInput[]): string {
  return [
    "# Tools",
    "",
    "You can call these functions:",
    "<tools>",
    ...tools.map(toolLine),
    "</tools>",
    "",
    'To call a function, reply with {"name": ..., "arguments": ...} inside <tool_call></tool_call> tags.',
  ].join("\n");
}

function argumentsText(raw: string | Record<string, unknown> | undefined): string {
  if (raw === undefined) return "{}";
  if (typeof raw !== "string") return JSON.stringify(raw);
  try {
    JSON.parse(raw);
    return raw;
  } catch {
    // Not JSON (a client echoing a broken call back): keep it readable as a string.
    return JSON.stringify(raw);
  }
}

type AssistantMessage = Extract<ChatMessageInput, { role: "assistant" }>;

/** The assistant's text with its calls as `<tool_call>` blocks, arguments as the client sent them. */
export function assistantText(message: AssistantMessage, param: string): string {
  const content = contentText(message.content, `${param}.content`);
  const calls = (message.tool_calls ?? []).map((call) => {
    const name = JSON.stringify(call.function.name);
    return `<tool_call>\n{"name": ${name}, "arguments": ${argumentsText(call.function.arguments)}}\n</tool_call>`;
  });
  // as the model writes them: text (if any), then each call on a line of its own
  return (content ? [content, ...calls] : calls).join("\n");
}

/** The engine's turns for a chat request; `tools` (if any) go into the first system turn. */
export function chatTurns(messages: readonly ChatMessageInput[], tools: readonly ToolInput[]): ChatTurn[] {
  const turns: ChatTurn[] = messages.map((message, i) => {
    const param = `messages[${i}]`;
    switch (message.role) {
      case "system":
      case "developer":
        return { role: "system", content: contentText(message.content, `${param}.content`) };
      case "user":
        return { role: "user", content: contentText(message.content, `${param}.content`) };
      case "assistant":
        return { role: "assistant", content: assistantText(message, param) };
      default:
        return { role: "tool", content: contentText(message.content, `${param}.content`) };
    }
  });
  if (tools.length === 0) return turns;
  const block = toolsBlock(tools);
  const first = turns[0];
  if (first?.role === "system") {
    turns[0] = { role: "system", content: first.content ? `${first.content}\n\n${block}` : block };
  } else {
    turns.unshift({ role: "system", content: block });
  }
  return turns;
}
