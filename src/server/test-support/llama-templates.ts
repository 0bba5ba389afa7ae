/**
 * Real models' chat templates for tests: llama.cpp's own test set (models/templates/*.jinja) from the
 * pinned release, fetched by scripts/fetch-llama-templates.mjs and never committed.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPT = fileURLToPath(new URL("../../../scripts/fetch-llama-templates.mjs", import.meta.url));

let dir: string | null = null;

/** The text of `models/templates/<name>.jinja`. */
export function llamaTemplate(name: string): string {
  dir ??= execFileSync(process.execPath, [SCRIPT], { encoding: "utf8" }).trim();
  return readFileSync(join(dir, `${name}.jinja`), "utf8");
}
