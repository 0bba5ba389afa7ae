/**
 * llama.cpp's own `llama-server`, built from the pinned source by scripts/build-llama-server.mjs, for tests
 * that run the gateway in front of the real thing: the optimised build `npm run compare` made where there is
 * one, else the unoptimised test profile (about 3 min on 2 cores the first time; a no-op once built). Where
 * the build cannot run (no compiler or cmake, no npm to fetch the source), the reason is returned for the
 * test to skip with.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("../../..", import.meta.url)));
const SCRIPT = join(ROOT, "scripts", "build-llama-server.mjs");

export type LlamaServerBinary = { readonly path: string } | { readonly skip: string };

let built: Promise<LlamaServerBinary> | null = null;

/** The built binary's path (building it first when needed), or why it cannot be built here. */
export function llamaServerBinary(): Promise<LlamaServerBinary> {
  built ??= new Promise((resolveBinary) => {
    const release = releaseBuild();
    if (release !== null) {
      resolveBinary({ path: release });
      return;
    }
    const child = spawn(process.execPath, [SCRIPT, "--profile", "test"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    child.on("error", (error) =>
      resolveBinary({ skip: `build-llama-server.mjs could not run: ${error.message}` }),
    );
    child.on("exit", (code) => {
      const binDir = out.trim().split("\n").at(-1)?.trim() ?? "";
      const path = join(binDir, "llama-server");
      if (code === 0 && existsSync(path)) resolveBinary({ path });
      else {
        const why = (err.trim().split("\n").at(-1) ?? "").slice(0, 300) || `exit ${code}`;
        resolveBinary({ skip: `llama-server could not be built here (${why})` });
      }
    });
  });
  return built;
}

/**
 * The optimised llama-server `npm run compare` built from the release our prebuilt libraries come from, when
 * its build finished (its meta is written last); null: none.
 */
function releaseBuild(): string | null {
  const lib = join(ROOT, "node_modules", "@node-llama-cpp", "linux-x64", "package.json");
  if (!existsSync(lib)) return null;
  const { version } = JSON.parse(readFileSync(lib, "utf8")) as { version: string };
  const dir = join(ROOT, ".cache", "llama-server", version);
  const server = join(dir, "bin", "llama-server");
  return existsSync(join(dir, "meta.json")) && existsSync(server) ? server : null;
}
