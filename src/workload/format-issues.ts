import type { z } from "zod";

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  return out || "(top level)";
}

const MAX_REPORTED_ISSUES = 5;

/** zod issues as `field.path: message; ...`, the first few only. */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  const parts = issues.slice(0, MAX_REPORTED_ISSUES).map((i) => `${formatPath(i.path)}: ${i.message}`);
  const more = issues.length - parts.length;
  if (more > 0) parts.push(`and ${more} more`);
  return parts.join("; ");
}
