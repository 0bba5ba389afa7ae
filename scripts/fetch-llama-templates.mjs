// Fetches the real models' chat templates that llama.cpp tests itself against (models/templates/*.jinja:
// Llama 3.x, Qwen, Mistral, Gemma, DeepSeek, Hermes, GLM, ... as their authors publish them) from the same
// pinned llama.cpp release as the headers, for Continuum's template tests. They are model data under their
// models' own licences, so they are read at test time and never committed.
//
// Usage: node scripts/fetch-llama-templates.mjs   (prints the template dir)
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { installedLibVersion, ROOT, run, unpackLlamaRelease } from "./fetch-llama-headers.mjs";

const TEMPLATE_DIR = "models/templates";

/** Makes sure `<root>/.cache/llama-templates/<version>/` holds the release's templates; returns it. */
export function ensureLlamaTemplates({ root = ROOT, version, log = console.error } = {}) {
  version ??= installedLibVersion(root);
  const cacheRoot = join(root, ".cache", "llama-templates");
  const dir = join(cacheRoot, version);
  if (existsSync(dir)) return dir;
  mkdirSync(cacheRoot, { recursive: true });
  const work = mkdtempSync(join(cacheRoot, ".work-"));
  try {
    const { gitDir } = unpackLlamaRelease(version, work, log);
    const stage = join(work, "templates");
    mkdirSync(stage);
    const tar = run("git", ["--git-dir", gitDir, "archive", "--format=tar", "HEAD", TEMPLATE_DIR], {
      encoding: "buffer",
    });
    execFileSync("tar", ["-xf", "-", "-C", stage, "--strip-components=2"], { input: tar });
    renameSync(stage, dir);
    return dir;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(ensureLlamaTemplates());
}
