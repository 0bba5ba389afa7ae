/** A usable tool identity: a trimmed, non-empty string without whitespace. Anything else is null. */
export function asToolName(raw: unknown): string | null {
  if (typeof raw !== "string") return null;
  const name = raw.trim();
  return name.length > 0 && !/\s/.test(name) ? name : null;
}
