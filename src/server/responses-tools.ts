/**
 * The tools of a Responses request as a chat request offers them, and the names of their calls back.
 *
 * Function tools pass as they are. A `namespace` tool groups function tools (Codex sends each MCP server's
 * tools and its sub-agent tools so, the Agents SDK's `toolNamespace` too): each of them is offered as
 * `<namespace>__<name>`, the one name Codex itself shows a model for such a tool (and Claude Code's for MCP
 * tools), and a call of that name comes back as the tool's own `name` with its `namespace`, by which Codex
 * routes it. Every other tool (hosted ones, `custom`, ...) is dropped: the server cannot run it.
 */
import { ApiError } from "./errors.js";
import {
  type FunctionTool,
  functionToolSchema,
  namespaceToolSchema,
  parseItem,
  type ResponsesBody,
} from "./responses-schema.js";

/** A namespace as offered: its function tools only. */
export interface NamespaceTool {
  readonly type: "namespace";
  readonly name: string;
  readonly description?: string | null | undefined;
  readonly tools: readonly FunctionTool[];
}

export type OfferedTool = FunctionTool | NamespaceTool;

/** A call's name as the Responses API writes it: a namespaced tool's own name and its namespace. */
export interface CallName {
  readonly name: string;
  readonly namespace?: string;
}

/** The name the model sees for tool `name` of `namespace`. */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}__${name}`;
}

/** The tools a request offers: as the response lists them, as the chat request offers them, and back. */
export class OfferedTools {
  /** tool names the model sees, of the tools in a namespace */
  private readonly inNamespace = new Map<string, CallName>();
  readonly chatTools: FunctionTool[] = [];

  private constructor(
    readonly listed: readonly OfferedTool[],
    /** the types of the tools dropped, each once */
    readonly dropped: readonly string[],
  ) {
    const names = new Set<string>();
    const offer = (tool: FunctionTool, param: string, called?: CallName) => {
      // a namespaced tool's name must be its own: its calls could not be told apart otherwise
      if (this.inNamespace.has(tool.name) || (called && names.has(tool.name))) {
        throw ApiError.badRequest(`two tools are offered as '${tool.name}'`, param, "invalid_value");
      }
      names.add(tool.name);
      if (called) this.inNamespace.set(tool.name, called);
      this.chatTools.push(tool);
    };
    for (const [i, tool] of listed.entries()) {
      if (tool.type === "function") {
        offer(tool, `tools[${i}]`);
        continue;
      }
      for (const [j, inner] of tool.tools.entries()) {
        const called = { name: inner.name, namespace: tool.name };
        offer({ ...inner, name: namespacedName(tool.name, inner.name) }, `tools[${i}].tools[${j}]`, called);
      }
    }
  }

  static none(): OfferedTools {
    return new OfferedTools([], []);
  }

  /** The tools of a request; a function tool that is not well formed is a 400 naming it. */
  static of(tools: ResponsesBody["tools"]): OfferedTools {
    const listed: OfferedTool[] = [];
    const dropped = new Set<string>();
    for (const [i, tool] of (tools ?? []).entries()) {
      if (tool.type === "function") {
        listed.push(parseItem(functionToolSchema, tool, `tools[${i}]`));
      } else if (tool.type === "namespace") {
        const namespace = parseItem(namespaceToolSchema, tool, `tools[${i}]`);
        const functions = namespace.tools.flatMap((inner, j) => {
          if (inner.type === "function")
            return [parseItem(functionToolSchema, inner, `tools[${i}].tools[${j}]`)];
          dropped.add(inner.type ?? "unknown");
          return [];
        });
        if (functions.length > 0) listed.push({ ...namespace, tools: functions });
      } else {
        dropped.add(tool.type ?? "unknown");
      }
    }
    return new OfferedTools(listed, [...dropped]);
  }

  /** A generated call's name as its function_call item carries it. */
  callName(chatName: string): CallName {
    return this.inNamespace.get(chatName) ?? { name: chatName };
  }
}

/** The name a chat message gives a call of the Responses API (an input item, a stored output item). */
export function chatNameOf(call: {
  readonly name: string;
  readonly namespace?: string | null | undefined;
}): string {
  return call.namespace ? namespacedName(call.namespace, call.name) : call.name;
}
