/**
 * How deep JSON may nest where code walks it. Tool schemas, call arguments and request bodies nest a
 * handful of levels; JSON.stringify, templates and most walkers recurse once per level and overflow the
 * stack a few thousand levels down. JSON.parse does not, so a parsed value is measured here without
 * recursion, and one nested deeper than MAX_JSON_DEPTH is refused (a request) or not read as an object (a
 * model's output).
 */

/** Deepest nesting of arrays and objects accepted in a request body and in a call's arguments. */
export const MAX_JSON_DEPTH = 64;

/** How deep arrays and objects nest in a parsed value (a scalar: 0), counting no further than `limit` + 1. */
export function nestingDepth(value: unknown, limit = MAX_JSON_DEPTH): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (node === null || typeof node !== "object") continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > limit) return deepest;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** Whether a parsed value nests no deeper than MAX_JSON_DEPTH. */
export function withinJsonDepth(value: unknown): boolean {
  return nestingDepth(value) <= MAX_JSON_DEPTH;
}

/**
 * How deep the brackets of a JSON text nest, outside its strings: the depth of the value it holds, or would
 * hold had it not been cut off. Text that is no JSON is measured the same way.
 */
export function jsonTextDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x7b || ch === 0x5b) deepest = Math.max(deepest, ++depth);
    else if (ch === 0x7d || ch === 0x5d) depth = Math.max(0, depth - 1);
  }
  return deepest;
}

interface Visit {
  readonly node: unknown;
  readonly depth: number;
  readonly key: string | number | null;
  readonly parent: Visit | null;
}

/** Path segments named of a value nested too deeply: its field, then the first levels of the nesting. */
const NAMED_SEGMENTS = 8;

/**
 * A field of `value` (a request body) that nests deeper than MAX_JSON_DEPTH levels, counted from the body,
 * as a path of at most eight segments (`messages[1].tool_calls[0].function.arguments.a.a`; the body
 * itself: ""); null: none.
 */
export function tooDeepPath(value: unknown): string | null {
  const stack: Visit[] = [{ node: value, depth: 0, key: null, parent: null }];
  while (stack.length > 0) {
    const visit = stack.pop() as Visit;
    const { node, depth } = visit;
    if (node === null || typeof node !== "object") continue;
    if (depth + 1 > MAX_JSON_DEPTH) return pathOf(visit);
    const entries: [string | number, unknown][] = Array.isArray(node)
      ? node.map((child, i) => [i, child])
      : Object.entries(node);
    for (const [key, child] of entries) stack.push({ node: child, depth: depth + 1, key, parent: visit });
  }
  return null;
}

function pathOf(visit: Visit): string {
  const keys: (string | number)[] = [];
  for (let v: Visit | null = visit; v !== null; v = v.parent) if (v.key !== null) keys.push(v.key);
  keys.reverse();
  let path = "";
  for (const key of keys.slice(0, NAMED_SEGMENTS)) {
    path += typeof key === "number" ? `[${key}]` : path ? `.${key}` : key;
  }
  return path;
}
