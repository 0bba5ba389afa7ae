/**
 * Real models' chat templates for tests: llama.cpp's own test set (models/templates/*.jinja) from the
 * pinned release, fetched by scripts/fetch-llama-templates.mjs and never committed.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ModelChatTemplate } from "../../engine/engine-api.js";

const SCRIPT = fileURLToPath(new URL("../../../scripts/fetch-llama-templates.mjs", import.meta.url));

let dir: string | null = null;

function templateDir(): string {
  dir ??= execFileSync(process.execPath, [SCRIPT], { encoding: "utf8" }).trim();
  return dir;
}

/** The text of `models/templates/<name>.jinja`. */
export function llamaTemplate(name: string): string {
  return readFileSync(join(templateDir(), `${name}.jinja`), "utf8");
}

/** The names of every template in the set. */
export function llamaTemplateNames(): string[] {
  return readdirSync(templateDir())
    .filter((file) => file.endsWith(".jinja"))
    .map((file) => file.slice(0, -".jinja".length))
    .sort();
}

/** Qwen3's template and special tokens, as a Qwen3 GGUF carries them (a reasoning model's: `<think>`). */
export function qwen3ChatTemplate(): ModelChatTemplate {
  return {
    source: llamaTemplate("Qwen-Qwen3-0.6B"),
    bosToken: "",
    eosToken: "<|im_end|>",
    eosTokenId: 2,
    addsBos: false,
  };
}

const OLLAMA_MAP = fileURLToPath(
  new URL("../../../node_modules/@huggingface/ollama-utils/src/chat-template-automap.ts", import.meta.url),
);

/**
 * The `tokenizer.chat_template` of an Ollama library GGUF (e.g. "library/gemma3:1b"), as Hugging Face's
 * ollama-utils package records it: for families llama.cpp's test set does not carry.
 */
export function ollamaGgufTemplate(model: string): string {
  const map = readFileSync(OLLAMA_MAP, "utf8");
  const entry = map.indexOf(`model: ${JSON.stringify(model)}`);
  const line = entry === -1 ? null : /gguf: ("(?:[^"\\]|\\.)*")/.exec(map.slice(entry));
  if (line === null) throw new Error(`no template for ${model} in ${OLLAMA_MAP}`);
  return JSON.parse(line[1]!) as string;
}
