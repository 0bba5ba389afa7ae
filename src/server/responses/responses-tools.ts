/**
 * The tools of a Responses request as a chat request offers them, and the names of their calls back.
 *
 * Function tools pass as they are. A `custom` tool (input as free text, or text in a grammar: GPT-5's
 * apply_patch) is offered as a function of one string, `input`, its format described to the model (a Lark
 * grammar cannot be enforced here), and its call comes back as a `custom_tool_call` with that text. A
 * `namespace` tool groups such tools (Codex sends each MCP server's tools and its sub-agent tools so, the
 * Agents SDK's `toolNamespace` too): each is offered as `<namespace>__<name>`, the one name Codex itself
 * shows a model for such a tool (and Claude Code's for MCP tools), and its call comes back as the tool's own
 * `name` with its `namespace`, by which Codex routes it. Every other tool (hosted ones, `local_shell`, ...)
 * is dropped: the server cannot run it.
 */
import { isRecord } from "../../tool-calls/json-objects.js";
import { ApiError } from "../errors.js";
import {
  type CustomTool,
  customToolSchema,
  type FunctionTool,
  functionToolSchema,
  namespaceToolSchema,
  parseItem,
  type ResponsesBody,
} from "./responses-schema.js";

/** A namespace as offered: its function and custom tools only. */
export interface NamespaceTool {
  readonly type: "namespace";
  readonly name: string;
  readonly description?: string | null | undefined;
  readonly tools: readonly (FunctionTool | CustomTool)[];
}

export type OfferedTool = FunctionTool | CustomTool | NamespaceTool;

/** A call as the Responses API writes it: of a function or a custom tool, in a namespace or not. */
export interface CalledTool {
  readonly type: "function" | "custom";
  readonly name: string;
  readonly namespace?: string;
}

/** Whether tools of this type run here (function and custom ones); every other type is dropped. */
export function runsHere(type: string | undefined): type is "function" | "custom" {
  return type === "function" || type === "custom";
}

/** The name the model sees for tool `name` of `namespace`. */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}__${name}`;
}

/** What a custom tool's `input` property tells the model of its format. */
function inputDescription(format: CustomTool["format"]): string {
  if (!format || format.type === "text") return "The tool's input, as free text.";
  return `The tool's input, as text in this ${format.syntax === "lark" ? "Lark" : "regular expression"} grammar:\n${format.definition}`;
}

/** A custom tool as the function the chat request offers: one string argument, `input`. */
function customAsFunction(tool: CustomTool): FunctionTool {
  return {
    type: "function",
    name: tool.name,
    description: tool.description,
    parameters: {
      type: "object",
      properties: { input: { type: "string", description: inputDescription(tool.format) } },
      required: ["input"],
      additionalProperties: false,
    },
  };
}

/** A custom tool call's text from the arguments the model wrote: their `input`, else the arguments as they are. */
export function customInput(args: string): string {
  try {
    const parsed: unknown = JSON.parse(args);
    if (isRecord(parsed) && typeof parsed.input === "string") return parsed.input;
  } catch {
    // not JSON: the text itself
  }
  return args;
}

/** The arguments a chat message gives a custom tool call that carried `input`. */
export function customArguments(input: string): string {
  return JSON.stringify({ input });
}

/** The tools a request offers: as the response lists them, as the chat request offers them, and back. */
export class OfferedTools {
  /** tool names the model sees, of the tools that are not plain functions */
  private readonly called = new Map<string, CalledTool>();
  readonly chatTools: FunctionTool[] = [];

  private constructor(
    readonly listed: readonly OfferedTool[],
    /** the types of the tools dropped, each once */
    readonly dropped: readonly string[],
  ) {
    const names = new Set<string>();
    const offer = (tool: FunctionTool | CustomTool, param: string, namespace?: string) => {
      const name = namespace === undefined ? tool.name : namespacedName(namespace, tool.name);
      const plain = tool.type === "function" && namespace === undefined;
      // a custom or namespaced tool's name must be its own: its calls could not be told apart otherwise
      if (this.called.has(name) || (!plain && names.has(name))) {
        throw ApiError.badRequest(`two tools are offered as '${name}'`, param, "invalid_value");
      }
      names.add(name);
      const called = { type: tool.type, name: tool.name, ...(namespace === undefined ? {} : { namespace }) };
      if (!plain) this.called.set(name, called);
      const offered = tool.type === "custom" ? customAsFunction(tool) : tool;
      this.chatTools.push({ ...offered, name });
    };
    for (const [i, tool] of listed.entries()) {
      if (tool.type !== "namespace") offer(tool, `tools[${i}]`);
      else for (const [j, inner] of tool.tools.entries()) offer(inner, `tools[${i}].tools[${j}]`, tool.name);
    }
  }

  static none(): OfferedTools {
    return new OfferedTools([], []);
  }

  /** The tools of a request; a tool that is not well formed is a 400 naming it. */
  static of(tools: ResponsesBody["tools"]): OfferedTools {
    const listed: OfferedTool[] = [];
    const dropped = new Set<string>();
    const runnable = (
      tool: { type?: string | undefined },
      param: string,
    ): FunctionTool | CustomTool | null => {
      if (tool.type === "function") return parseItem(functionToolSchema, tool, param);
      if (tool.type === "custom") return parseItem(customToolSchema, tool, param);
      dropped.add(tool.type ?? "unknown");
      return null;
    };
    for (const [i, tool] of (tools ?? []).entries()) {
      if (tool.type !== "namespace") {
        const offered = runnable(tool, `tools[${i}]`);
        if (offered) listed.push(offered);
        continue;
      }
      const namespace = parseItem(namespaceToolSchema, tool, `tools[${i}]`);
      const inner = namespace.tools.flatMap((t, j) => runnable(t, `tools[${i}].tools[${j}]`) ?? []);
      if (inner.length > 0) listed.push({ ...namespace, tools: inner });
    }
    return new OfferedTools(listed, [...dropped]);
  }

  /** A generated call's tool, by the name the model wrote. */
  callOf(chatName: string): CalledTool {
    return this.called.get(chatName) ?? { type: "function", name: chatName };
  }
}

/** The name a chat message gives a call of the Responses API (an input item, a stored output item). */
export function chatNameOf(call: {
  readonly name: string;
  readonly namespace?: string | null | undefined;
}): string {
  return call.namespace ? namespacedName(call.namespace, call.name) : call.name;
}
