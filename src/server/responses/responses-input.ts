/**
 * A Responses API request as the chat-completions request the server generates from: input items become
 * chat messages (`developer` turns system ones), function and custom tools, also those in a namespace,
 * become chat tools (responses-tools.ts), and the tools the server cannot run (hosted ones such as
 * `web_search` and `file_search`, `local_shell`, ...) are dropped.
 */
import type { z } from "zod";
import { ApiError } from "../errors.js";
import {
  type ChatCompletionBody,
  type ChatMessageInput,
  chatCompletionSchema,
  type ToolChoiceInput,
} from "../schemas.js";
import { refusedMedia } from "../templates/media-notes.js";
import {
  customToolCallItemSchema,
  customToolCallOutputItemSchema,
  functionCallItemSchema,
  functionCallOutputItemSchema,
  messageItemSchema,
  parseItem,
  type ResponsesBody,
  wantsTextLogprobs,
} from "./responses-schema.js";
import { chatNameOf, customArguments, OfferedTools, runsHere } from "./responses-tools.js";

export interface ChatRequest {
  readonly chat: ChatCompletionBody;
  /** the messages without the instructions: what a stored response is continued from */
  readonly conversation: readonly ChatMessageInput[];
  /** the tools offered and dropped */
  readonly tools: OfferedTools;
}

type AssistantMessage = Extract<ChatMessageInput, { role: "assistant" }>;
type ItemContent = z.infer<typeof messageItemSchema>["content"];

const TEXT_PARTS = new Set(["input_text", "output_text", "text"]);

function contentText(content: ItemContent, param: string): string {
  if (typeof content === "string") return content;
  return content
    .map((part, i) => {
      if (!TEXT_PARTS.has(part.type) || typeof part.text !== "string") {
        throw ApiError.badRequest(
          refusedMedia("responses", part.type) ??
            `content part of type ${JSON.stringify(part.type)} is not supported (text only)`,
          `${param}.content[${i}]`,
          "unsupported_value",
        );
      }
      return part.text;
    })
    .join("");
}

/** A reasoning item's text: its `reasoning_text` parts, else its summary's; null when it has neither. */
function reasoningText(item: Record<string, unknown>): string | null {
  const texts = (parts: unknown) =>
    Array.isArray(parts)
      ? parts.flatMap((p) =>
          p && typeof p === "object" && typeof p.text === "string" ? [p.text as string] : [],
        )
      : [];
  const content = texts(item["content"]);
  const text = (content.length > 0 ? content : texts(item["summary"])).join("\n\n");
  return text.length > 0 ? text : null;
}

/**
 * Input items as chat messages; consecutive function calls join the assistant turn before them, and a
 * reasoning item's text goes with the assistant turn that follows it (the model's template places it).
 */
export function inputMessages(input: ResponsesBody["input"], field = "input"): ChatMessageInput[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  const messages: ChatMessageInput[] = [];
  const callNames = new Map<string, string>();
  // a reasoning item's text, for the assistant turn that follows it
  let reasoning: string | null = null;
  const thought = () => {
    const fields = reasoning === null ? {} : { reasoning_content: reasoning };
    reasoning = null;
    return fields;
  };
  for (const [i, item] of input.entries()) {
    const param = `${field}[${i}]`;
    const type = item.type ?? "message";
    if (type === "reasoning") {
      reasoning = reasoningText(item) ?? reasoning;
      continue;
    }
    if (type === "message") {
      const message = parseItem(messageItemSchema, item, param);
      const role = message.role === "developer" ? "system" : message.role;
      const content = contentText(message.content, param);
      messages.push(role === "assistant" ? { role, content, ...thought() } : { role, content });
    } else if (type === "function_call" || type === "custom_tool_call") {
      // a custom tool's call is the function call of its one string argument (responses-tools.ts)
      const call =
        type === "function_call"
          ? parseItem(functionCallItemSchema, item, param)
          : parseItem(customToolCallItemSchema, item, param);
      const name = chatNameOf(call);
      const args = call.type === "function_call" ? call.arguments : customArguments(call.input);
      callNames.set(call.call_id, name);
      const last = messages.at(-1);
      const turn: AssistantMessage =
        last?.role === "assistant" && reasoning === null
          ? last
          : { role: "assistant", content: null, tool_calls: [], ...thought() };
      if (turn !== last) messages.push(turn);
      turn.tool_calls = [
        ...(turn.tool_calls ?? []),
        { id: call.call_id, type: "function", function: { name, arguments: args } },
      ];
    } else if (type === "function_call_output" || type === "custom_tool_call_output") {
      const output =
        type === "function_call_output"
          ? parseItem(functionCallOutputItemSchema, item, param)
          : parseItem(customToolCallOutputItemSchema, item, param);
      const name = callNames.get(output.call_id);
      messages.push({
        role: "tool",
        content: contentText(output.output, param),
        tool_call_id: output.call_id,
        ...(name === undefined ? {} : { name }),
      });
    } else {
      throw ApiError.badRequest(
        `input items of type ${JSON.stringify(type)} are not supported`,
        `${param}.type`,
        "unsupported_value",
      );
    }
  }
  return messages;
}

function chatToolChoice(
  choice: ResponsesBody["tool_choice"],
  hasTools: boolean,
): ToolChoiceInput | undefined {
  if (!hasTools || choice === null || choice === undefined) return undefined;
  if (typeof choice === "string") return choice;
  if (!runsHere(choice.type)) return "auto"; // a hosted tool, which was dropped
  const { name, namespace } = choice;
  if (!name) throw ApiError.badRequest(`tool_choice of type ${choice.type} needs a name`, "tool_choice.name");
  return { type: "function", function: { name: chatNameOf({ name, namespace }) } };
}

/** The chat request for `body`; `previous`: the conversation of the response it continues, if any. */
export function chatRequestOf(body: ResponsesBody, previous: readonly ChatMessageInput[]): ChatRequest {
  const {
    input,
    instructions,
    tools,
    tool_choice,
    max_output_tokens,
    store,
    background,
    previous_response_id,
    metadata,
    prompt_cache_key,
    client_metadata,
    top_logprobs,
    include,
    max_tool_calls,
    safety_identifier,
    reasoning,
    ...common
  } = body;
  const conversation = [...previous, ...inputMessages(input)];
  if (conversation.length === 0) throw ApiError.badRequest("input has no items", "input");
  const offered = OfferedTools.of(tools);
  const system: ChatMessageInput[] = instructions ? [{ role: "system", content: instructions }] : [];
  const chat = chatCompletionSchema.parse({
    ...common,
    messages: [...system, ...conversation],
    tools: offered.chatTools.map(({ type, ...fn }) => ({ type, function: fn })),
    tool_choice: chatToolChoice(tool_choice, offered.chatTools.length > 0),
    reasoning_effort: reasoning?.effort,
    ...(wantsTextLogprobs({ include }) ? { logprobs: true, top_logprobs: top_logprobs ?? 0 } : {}),
  });
  return { chat, conversation, tools: offered };
}
