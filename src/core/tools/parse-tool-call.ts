import { jsonObjectsIn } from "./json-objects.js";
import { headCommand } from "./shell-head-command.js";
import { asToolName } from "./tool-name.js";

const REASONING_TAG = /<(\/?)think(?:ing)?>/gi;

/**
 * The output without its `<think>`/`<thinking>` reasoning. An opening tag that is never closed hides
 * the rest of the output (the model was cut off while reasoning). A closing tag that comes before any
 * opening tag hides everything before it: Qwen3 and DeepSeek-R1 chat templates inject the opening tag
 * into the prompt, so the completion starts inside the reasoning. Only the first tag gets that reading;
 * a stray closing tag later on is ordinary text (a command may well print one).
 */
export function stripReasoning(text: string): string {
  let kept = "";
  let keepFrom = 0;
  let inReasoning = false;
  let isFirstTag = true;
  for (const tag of text.matchAll(REASONING_TAG)) {
    const isClosing = tag[1] === "/";
    if (isClosing && (inReasoning || isFirstTag)) {
      inReasoning = false;
      keepFrom = tag.index + tag[0].length;
    } else if (!isClosing && !inReasoning) {
      kept += text.slice(keepFrom, tag.index);
      inReasoning = true;
    }
    isFirstTag = false;
  }
  return inReasoning ? kept : kept + text.slice(keepFrom);
}

function firstJsonObject(text: string): Record<string, unknown> | undefined {
  for (const object of jsonObjectsIn(text)) return object;
  return undefined;
}

const HERMES_CALL = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/;
// Qwen3-Coder writes the call as XML inside the same tags: <tool_call><function=name>...
const XML_FUNCTION = /^\s*<function=([^>\s]+)>/;
// Arguments with raw newlines make the JSON invalid while the name is still plain to read.
const JSON_NAME_FIELD = /"name"\s*:\s*"([^"\\]*)"/;

/** Hermes/Qwen: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, first call wins. */
function fromHermesToolCall(text: string): string | null {
  const body = HERMES_CALL.exec(text)?.[1];
  if (body === undefined) return null;
  const xmlName = XML_FUNCTION.exec(body)?.[1];
  if (xmlName !== undefined) return asToolName(xmlName);
  const call = firstJsonObject(body);
  if (call) return asToolName(call["name"]);
  return asToolName(JSON_NAME_FIELD.exec(body)?.[1]);
}

const PYTHON_TAG = "<|python_tag|>";
const FUNCTION_CALL_HEAD = /^([A-Za-z_][\w.]*)\s*\(/;

/** `brave_search.call(query=...)` is how Llama 3.1 calls its built-in tool `brave_search`. */
function functionCallName(text: string): string | null {
  const callee = FUNCTION_CALL_HEAD.exec(text)?.[1];
  return callee === undefined ? null : asToolName(callee.replace(/\.call$/, ""));
}

/** Llama 3: `<|python_tag|>{"name": ...}` or `<|python_tag|>func_name(arg=...)`. */
function fromLlamaPythonTag(text: string): string | null {
  const tagAt = text.indexOf(PYTHON_TAG);
  if (tagAt === -1) return null;
  const call = text.slice(tagAt + PYTHON_TAG.length).trimStart();
  if (call.startsWith("{")) return asToolName(firstJsonObject(call)?.["name"]);
  return functionCallName(call);
}

/** Llama 3 plain JSON: the output is `{"name": ..., "parameters": ...}` or `{"type": "function", ...}`. */
function fromLlamaJson(text: string): string | null {
  const trimmed = text.trimStart();
  if (!trimmed.startsWith("{")) return null;
  const call = firstJsonObject(trimmed);
  // Without these keys a JSON answer such as {"name": "Alice", "age": 3} is data, not a call.
  if (!call || !("parameters" in call || "arguments" in call || call["type"] === "function")) return null;
  return asToolName(call["name"]);
}

/** Llama 3.2/4 pythonic: `[func_name(a=1), other(b=2)]`, first call wins. */
function fromPythonicList(text: string): string | null {
  const trimmed = text.trimStart();
  return trimmed.startsWith("[") ? functionCallName(trimmed.slice(1).trimStart()) : null;
}

/** Terminal-Bench (Terminus): `{"commands": [{"keystrokes": "ls -la\n"}, ...]}`, first command wins. */
function fromTerminalBenchCommands(text: string): string | null {
  for (const object of jsonObjectsIn(text)) {
    const commands = object["commands"];
    if (!Array.isArray(commands)) continue;
    for (const command of commands) {
      const keystrokes: unknown = command?.keystrokes;
      if (typeof keystrokes !== "string") continue;
      const head = headCommand(keystrokes);
      if (head !== null) return head;
    }
    return null;
  }
  return null;
}

const SHELL_BLOCK = /```(?:bash|sh|shell)[^\S\n]*\n([\s\S]*?)\n?```/g;

/** mini-swe-agent: exactly one ```bash block; zero or several mean the output is not a valid action. */
function fromSingleShellBlock(text: string): string | null {
  const blocks = [...text.matchAll(SHELL_BLOCK)];
  return blocks.length === 1 ? headCommand(blocks[0]![1]!) : null;
}

const FORMAT_PARSERS: readonly ((text: string) => string | null)[] = [
  fromHermesToolCall,
  fromLlamaPythonTag,
  fromLlamaJson,
  fromPythonicList,
  fromTerminalBenchCommands,
  fromSingleShellBlock,
];

/**
 * Identity of the tool a model output calls, or null when it calls none that can be recognised.
 * Reasoning is ignored, so a command the model only thought about is never taken for the call.
 */
export function parseToolName(output: string): string | null {
  const answer = stripReasoning(output);
  for (const parse of FORMAT_PARSERS) {
    const name = parse(answer);
    if (name !== null) return name;
  }
  return null;
}

/** Name of the first function in an OpenAI-style `tool_calls` list. */
export function toolNameFromOpenAIToolCalls(
  toolCalls: readonly { function?: { name?: string } }[] | undefined,
): string | null {
  if (!Array.isArray(toolCalls)) return null;
  for (const call of toolCalls) {
    const name = asToolName(call?.function?.name);
    if (name !== null) return name;
  }
  return null;
}

const FORK_BASH_BLOCK = /```bash\s*\n(.*?)\n```/gs;

/**
 * The CacheTTL authors' vLLM fork, kept as a baseline: exactly one ```bash block, its first word.
 * It does not skip reasoning or `cd`, so `cd /testbed && pytest` is the tool `cd`.
 */
export function parseForkToolName(output: string): string | null {
  const blocks = [...output.matchAll(FORK_BASH_BLOCK)];
  if (blocks.length !== 1) return null;
  return blocks[0]![1]!.trim().split(/\s+/)[0] || null;
}
