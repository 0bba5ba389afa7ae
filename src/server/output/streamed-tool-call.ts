import { leadingJsonObjectEnd } from "../../tool-calls/json-objects.js";
import { newToolCallId } from "./tool-calls.js";

const CALL_HEAD = /^\s*<tool_call>\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*/;

function jsonString(escaped: string): string | null {
  try {
    return JSON.parse(`"${escaped}"`) as string;
  } catch {
    return null;
  }
}

/**
 * Streams a Hermes call's arguments while the model writes them, as OpenAI's deltas do: once the name is
 * complete, the call's id, type and name with empty arguments, then argument text as it grows. Text from
 * the last "}" on is held back: it may be the call wrapper's own closing brace. The argument deltas of a
 * call add up to its arguments as generated (the object, or what was written before the output was cut).
 */
export class StreamedToolCall {
  readonly id = newToolCallId();
  name: string | null = null;
  private sent = 0;

  /** `held`: the output from where a call may start. Returns whether the call opened now, and new argument text. */
  push(held: string): { opened: boolean; args: string } {
    const head = CALL_HEAD.exec(held);
    if (head === null) return { opened: false, args: "" };
    let opened = false;
    if (this.name === null) {
      this.name = jsonString(head[1]!);
      if (this.name === null) return { opened: false, args: "" };
      opened = true;
    }
    const args = held.slice(head[0].length);
    const cut = args.lastIndexOf("}");
    const ready = cut === -1 ? args : args.slice(0, cut);
    const fresh = ready.slice(this.sent);
    this.sent = Math.max(this.sent, ready.length);
    return { opened, args: fresh };
  }

  /** The argument text not sent yet, once the output is complete (`held` as in push). */
  finish(held: string): string {
    const head = CALL_HEAD.exec(held);
    if (head === null) return "";
    const rest = held.slice(head[0].length);
    const end = leadingJsonObjectEnd(rest);
    const args = end === -1 ? rest : rest.slice(0, end);
    return args.slice(this.sent);
  }

  get opened(): boolean {
    return this.name !== null;
  }
}
