/**
 * A model's own Jinja chat template (`tokenizer.chat_template`, or `serve --chat-template FILE`),
 * rendered as llama-server's `--jinja` does: OpenAI messages with their tool calls (arguments as
 * objects) and tool results, the offered tools, `add_generation_prompt`, `bos_token` / `eos_token`;
 * what the template cannot render is rewritten into what it can (template-polyfills.ts), and the Python
 * @huggingface/jinja lacks into what it runs (jinja-compat.ts).
 */

import type { ModelChatTemplate, RenderChatOptions } from "../../engine/engine-api.js";
import { CHATML_TEMPLATE } from "../../gguf/chat-template.js";
import { isRecord, parseJsonLenient } from "../../tool-calls/json-objects.js";
import { ApiError } from "../errors.js";
import { templateIsHarmony } from "../output/harmony.js";
import { type ThinkTags, thinkTagsOf } from "../output/reasoning.js";
import { recipientThinks } from "../output/recipient-formats.js";
import { detectToolCallFormat, type ToolCallFormat } from "../output/tool-call-formats.js";
import type { ChatMessageInput, ToolInput } from "../schemas.js";
import { assistantText, contentText } from "./chat-render.js";
import { CompatTemplate } from "./jinja-compat.js";
import {
  isToolBlind,
  type TemplateMessage,
  toolsAsText,
  withAlternatingRoles,
  withoutNullTypes,
  withSystemInUserTurn,
  withTypedContent,
} from "./template-polyfills.js";

/**
 * Templates format arguments themselves (`| tojson`), so they get the object, as llama-server gives; one
 * that writes a string it is given and not an object (`asText`, see `argumentsAsText`) gets the JSON text.
 */
function templateArguments(raw: string | Record<string, unknown> | undefined, asText: boolean): unknown {
  if (asText) return typeof raw === "string" ? raw : JSON.stringify(raw ?? {});
  if (raw === undefined) return {};
  if (typeof raw !== "string") return raw;
  const parsed = parseJsonLenient(raw);
  return isRecord(parsed) ? parsed : raw;
}

/** What `argumentsAsText` looks for in the prompt: the probe call's argument. */
const PROBE_ARGUMENT = "probe-argument-value";

/** llama-server's conversation for the probe (common/jinja/caps.cpp), the call's arguments as given. */
function probeConversation(args: unknown): TemplateMessage[] {
  const call = { id: "call00001", type: "function", function: { name: "tool1", arguments: args } };
  return [
    { role: "user", content: "User message" },
    { role: "assistant", content: "", tool_calls: [call] },
    { role: "tool", content: "Tool response", tool_call_id: "call00001", name: "tool1" },
    { role: "assistant", content: "The tool response was 'tool response'" },
    { role: "user", content: "User message" },
  ];
}

const PROBE_TOOLS: readonly ToolInput[] = [
  {
    type: "function",
    function: {
      name: "tool1",
      description: "Tool description",
      parameters: {
        type: "object",
        properties: { arg: { type: "string", description: "Arg description" } },
        required: ["arg"],
      },
    },
  },
];

/** `callsAsText`: for a tool-blind template, calls written into the assistant's text. */
/**
 * An assistant message's thinking, under the names templates read it by: Qwen3's `reasoning_content`,
 * gpt-oss's `thinking`. Not beside both content and calls: gpt-oss's template then takes the content for the
 * thinking and refuses a second one.
 */
function thinkingOf(
  message: Extract<ChatMessageInput, { role: "assistant" }>,
  content: string,
  hasCalls: boolean,
): { reasoning_content?: string; thinking?: string } {
  const thinking = message.reasoning_content ?? message.reasoning ?? "";
  if (thinking.length === 0 || (hasCalls && content.length > 0)) return {};
  return { reasoning_content: thinking, thinking };
}

function templateMessages(
  messages: readonly ChatMessageInput[],
  callsAsText: boolean,
  argumentsAsText: () => boolean,
): TemplateMessage[] {
  const toolNames = new Map<string, string>();
  return messages.map((message, i) => {
    const content = contentText(message.content, `messages[${i}].content`);
    switch (message.role) {
      case "developer":
        return { role: "system", content };
      case "assistant": {
        const calls = message.tool_calls ?? [];
        if (callsAsText) return { role: "assistant", content: assistantText(message, `messages[${i}]`) };
        const thinking = thinkingOf(message, content, calls.length > 0);
        if (calls.length === 0) return { role: "assistant", content, ...thinking };
        return {
          role: "assistant",
          content,
          ...thinking,
          tool_calls: calls.map((call) => {
            if (call.id) toolNames.set(call.id, call.function.name);
            return {
              id: call.id ?? "",
              type: "function",
              function: {
                name: call.function.name,
                arguments: templateArguments(call.function.arguments, argumentsAsText()),
              },
            };
          }),
        };
      }
      case "tool": {
        const id = message.tool_call_id ?? "";
        const name = message.name ?? toolNames.get(id);
        return { role: "tool", content, tool_call_id: id, ...(name === undefined ? {} : { name }) };
      }
      default:
        return { role: message.role, content };
    }
  });
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * The `datetime` llama-server gives every template (Firefunction v2 writes "Today is {datetime}."): the
 * local date as `%b %d %Y`. (Its `date_string` is not given: Llama 3.1's template then keeps its own date.)
 */
function llamaDatetime(now: Date): string {
  return `${MONTHS[now.getMonth()]} ${String(now.getDate()).padStart(2, "0")} ${now.getFullYear()}`;
}

/** What the server puts in a template's context itself. */
const TEMPLATE_CONTEXT = ["messages", "tools", "add_generation_prompt", "bos_token", "eos_token"];

export class ChatTemplate {
  /** How the model writes calls: its template's own format, or `<tool_call>` blocks when it has none. */
  readonly format: ToolCallFormat;
  /**
   * the template writes thinking (think tags, harmony channels, Muse Glimmer's messages to itself): its model
   * reasons before it answers
   */
  readonly thinks: boolean;
  /** the tags its model's thinking stands between (null: none, or the messages of harmony or Muse Glimmer) */
  readonly thinkTags: ThinkTags | null;
  private readonly template: CompatTemplate;
  private readonly toolBlind: boolean;
  /** see `argumentsAsText`; probed when a conversation first has calls */
  private writesTextArguments: boolean | undefined;

  constructor(
    source: string,
    private readonly model: ModelChatTemplate,
  ) {
    this.template = new CompatTemplate(source);
    this.toolBlind = isToolBlind(source);
    this.format = this.toolBlind ? "generic" : detectToolCallFormat(source);
    // a harmony model's analysis channel is its thinking (harmony.ts), a Muse Glimmer's messages to itself
    this.thinkTags = thinkTagsOf(source);
    this.thinks = this.thinkTags !== null || templateIsHarmony(source) || recipientThinks(this.format);
  }

  private renderMessages(
    messages: TemplateMessage[],
    tools: readonly ToolInput[],
    variables: Readonly<Record<string, unknown>>,
    addGenerationPrompt: boolean,
  ): string {
    const context: Record<string, unknown> = {
      datetime: llamaDatetime(new Date()),
      ...variables,
      messages,
      add_generation_prompt: addGenerationPrompt,
      bos_token: this.model.bosToken,
      eos_token: this.model.eosToken,
    };
    // a tool without a description gets an empty one: some templates write it unconditionally (gpt-oss's)
    if (tools.length > 0) {
      context["tools"] = tools.map((tool) =>
        tool.function.description == null
          ? { ...tool, function: { ...tool.function, description: "" } }
          : tool,
      );
    }
    return this.template.render(context);
  }

  /**
   * Whether calls' arguments go to the template as JSON text rather than an object, as llama-server decides
   * it (common/jinja/caps.cpp: whether the template reads an argument of the object): a call with object
   * arguments is rendered, and if the prompt has no sign of the argument but Python's str() of the whole
   * object (Functionary v3.2 joins the arguments to a string) and has it when they are text, text.
   */
  private argumentsAsText(): boolean {
    const writes = (args: unknown): boolean => {
      try {
        const prompt = this.renderMessages(probeConversation(args), PROBE_TOOLS, {}, true);
        return prompt.replaceAll(`{'arg': '${PROBE_ARGUMENT}'}`, "").includes(PROBE_ARGUMENT);
      } catch {
        return false;
      }
    };
    this.writesTextArguments ??=
      !writes({ arg: PROBE_ARGUMENT }) && writes(JSON.stringify({ arg: PROBE_ARGUMENT }));
    return this.writesTextArguments;
  }

  /**
   * The prompt for a chat request, ending with the generation prompt unless `options` say not to (a
   * chat `/tokenize` counts without it). What the template refuses is tried again as the template can
   * take it: system text in the first user turn (Gemma 2), content as
   * typed parts, both; if every form is refused, the template's own reason is a 400. `variables`: the
   * request's own for the template (vLLM's `chat_template_kwargs`, e.g. Qwen3's `enable_thinking`).
   */
  render(
    messages: readonly ChatMessageInput[],
    tools: readonly ToolInput[],
    variables: Readonly<Record<string, unknown>> = {},
    options: RenderChatOptions = {},
  ): string {
    const reserved = Object.keys(variables).filter((k) => TEMPLATE_CONTEXT.includes(k));
    if (reserved.length > 0) {
      throw ApiError.badRequest(
        `chat_template_kwargs cannot set ${reserved.join(", ")}: the server renders them from the request`,
        "chat_template_kwargs",
      );
    }
    let fitted = templateMessages(messages, this.toolBlind, () => this.argumentsAsText());
    let offered = tools;
    if (this.toolBlind) {
      fitted = toolsAsText(fitted, tools);
      offered = [];
    }
    // built only when the forms before them were refused
    const alternating = () => withAlternatingRoles(fitted);
    const forms = [
      () => fitted,
      () => withSystemInUserTurn(fitted),
      () => withTypedContent(fitted),
      () => withTypedContent(withSystemInUserTurn(fitted)),
      alternating,
      () => withSystemInUserTurn(alternating()),
      () => withTypedContent(alternating()),
      () => withTypedContent(withSystemInUserTurn(alternating())),
    ];
    // the tools as sent, then without "null" in their parameters' type lists (Hermes' and Command R+'s
    // templates loop over a type they take for a list of types)
    const toolForms = [offered, withoutNullTypes(offered)].filter((t, i, all) => i === 0 || t !== all[0]);
    const attempts = toolForms.flatMap((toolForm) =>
      forms.map(
        (form) => () => this.renderMessages(form(), toolForm, variables, options.addGenerationPrompt ?? true),
      ),
    );
    let prompt: string | undefined;
    let refusal: unknown;
    for (const attempt of attempts) {
      try {
        prompt = attempt();
        break;
      } catch (error) {
        refusal ??= error;
      }
    }
    if (prompt === undefined) {
      // Templates refuse what their model cannot take (raise_exception): roles out of order, bad ids.
      throw ApiError.badRequest(`the model's chat template: ${(refusal as Error).message}`, "messages");
    }
    // The tokenizer adds BOS itself; a template's own BOS would make it twice (llama-server strips it too).
    if (this.model.addsBos && this.model.bosToken !== "" && prompt.startsWith(this.model.bosToken)) {
      prompt = prompt.slice(this.model.bosToken.length);
    }
    return prompt;
  }
}

/**
 * What chat requests are rendered with: the `--chat-template` override, else the model's own template;
 * null (llama.cpp's template detection over the server's plain turns) when there is none, and for the
 * built-in models, whose ChatML template that path already renders exactly.
 */
export function serverChatTemplate(model: ModelChatTemplate, override: string | null): ChatTemplate | null {
  const source = override ?? model.source;
  if (source === null || (override === null && source === CHATML_TEMPLATE)) return null;
  return new ChatTemplate(source, model);
}

/**
 * What chat requests that offer tools are rendered with, where it is not `serverChatTemplate`: the model's own
 * `tool_use` template (as llama-server picks it), unless `--chat-template` overrides every request's.
 */
export function serverToolUseTemplate(
  model: ModelChatTemplate,
  override: string | null,
): ChatTemplate | null {
  const source = model.toolUseSource ?? null;
  return override === null && source !== null ? new ChatTemplate(source, model) : null;
}
