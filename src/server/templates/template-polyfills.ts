/**
 * Rewrites for what a model's chat template cannot render, as llama-server's `--jinja` polyfills do.
 * Templates written before tool calling (Gemma 2 and 3, Phi-3.5) ignore `tools` and `tool_calls` and
 * refuse role "tool" (Gemma's roles must alternate); Gemma 2 refuses role "system"; Gemma 3 reads a
 * system message only as typed content parts; Mistral's and Gemma's templates refuse a system message after
 * the first or two user messages in a row, which agent harnesses send.
 */

import type { ToolInput } from "../schemas.js";
import { toolsBlock } from "./chat-render.js";

export type TemplateMessage = Record<string, unknown>;

/** A template that never mentions tools renders none of the tool list, calls or results. */
export function isToolBlind(source: string): boolean {
  return !/tool/i.test(source);
}

function textOf(message: TemplateMessage): string {
  return typeof message["content"] === "string" ? message["content"] : "";
}

/**
 * Tools as text for a tool-blind template, whose assistant messages already carry their calls as
 * `<tool_call>` blocks (what the model is asked to write and the general parser reads): the tool list
 * as a Hermes-style block in the system message, results as user turns in `<tool_response>`, merged
 * with a neighbouring user turn so roles still alternate.
 */
export function toolsAsText(messages: TemplateMessage[], tools: readonly ToolInput[]): TemplateMessage[] {
  let out = messages;
  if (tools.length > 0) {
    const block = toolsBlock(tools);
    const first = out[0];
    out =
      first?.["role"] === "system"
        ? [{ ...first, content: textOf(first) ? `${textOf(first)}\n\n${block}` : block }, ...out.slice(1)]
        : [{ role: "system", content: block }, ...out];
  }
  return toolResultsAsUserTurns(out);
}

/** Every content as a list of typed text parts (`[{type: "text", text}]`). */
export function withTypedContent(messages: TemplateMessage[]): TemplateMessage[] {
  return messages.map((m) =>
    typeof m["content"] === "string" ? { ...m, content: [{ type: "text", text: m["content"] }] } : m,
  );
}

function toolResultsAsUserTurns(messages: TemplateMessage[]): TemplateMessage[] {
  const out: TemplateMessage[] = [];
  let lastWasResult = false;
  for (const m of messages) {
    const isResult = m["role"] === "tool";
    const text = isResult ? `<tool_response>\n${textOf(m)}\n</tool_response>` : textOf(m);
    const previous = out.at(-1);
    if ((isResult || (lastWasResult && m["role"] === "user")) && previous?.["role"] === "user") {
      out[out.length - 1] = { role: "user", content: `${textOf(previous)}\n${text}` };
    } else {
      out.push(isResult ? { role: "user", content: text } : m);
    }
    lastWasResult = isResult || (lastWasResult && m["role"] === "user");
  }
  return out;
}

/**
 * Roles as strict templates take them (Mistral's, Gemma's: one system message first, then turns that
 * alternate): every system message in one at the start (in order), and consecutive user messages in one.
 * Agent harnesses send both: Codex its instructions and a developer message, then two user messages;
 * Claude Code a system message after the user's.
 */
export function withAlternatingRoles(messages: TemplateMessage[]): TemplateMessage[] {
  const system = messages.filter((m) => m["role"] === "system").map(textOf);
  const out: TemplateMessage[] = system.length > 0 ? [{ role: "system", content: system.join("\n\n") }] : [];
  for (const m of messages) {
    if (m["role"] === "system") continue;
    const previous = out.at(-1);
    if (m["role"] === "user" && previous?.["role"] === "user") {
      out[out.length - 1] = { ...previous, content: `${textOf(previous)}\n\n${textOf(m)}` };
    } else {
      out.push(m);
    }
  }
  return out;
}

/**
 * The tools with "null" taken out of their parameters' JSON-schema type lists (`["integer", "null"]` ->
 * `"integer"`), at any depth; the same array when no type list holds "null".
 */
export function withoutNullTypes(tools: readonly ToolInput[]): readonly ToolInput[] {
  let changed = false;
  const strip = (schema: unknown): unknown => {
    if (Array.isArray(schema)) return schema.map(strip);
    if (typeof schema !== "object" || schema === null) return schema;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(schema)) {
      if (key === "type" && Array.isArray(value) && value.includes("null")) {
        const types = value.filter((t) => t !== "null");
        changed = true;
        if (types.length > 0) out[key] = types.length === 1 ? types[0] : types;
      } else {
        out[key] = strip(value);
      }
    }
    return out;
  };
  const stripped = tools.map((tool) =>
    tool.function.parameters
      ? {
          ...tool,
          function: {
            ...tool.function,
            parameters: strip(tool.function.parameters) as Record<string, unknown>,
          },
        }
      : tool,
  );
  return changed ? stripped : tools;
}

/** System messages as the start of the next user turn. */
export function withSystemInUserTurn(messages: TemplateMessage[]): TemplateMessage[] {
  const out: TemplateMessage[] = [];
  let pending = "";
  for (const m of messages) {
    if (m["role"] === "system") {
      pending = pending ? `${pending}\n\n${textOf(m)}` : textOf(m);
    } else if (pending && m["role"] === "user") {
      out.push({ ...m, content: `${pending}\n\n${textOf(m)}` });
      pending = "";
    } else {
      out.push(m);
    }
  }
  if (pending) out.push({ role: "user", content: pending });
  return out;
}
