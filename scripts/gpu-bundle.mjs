// `npm run gpu-bundle`: everything a GPU machine without network needs to build the CUDA plugin and run
// `npm run gpu-check`, packed into parts of at most 40 MB: this node binary, the production dependencies
// (with the prebuilt llama.cpp CPU libraries), dist/, our addon, and the pinned ggml source tree.
//
// Output in .cache/gpu-bundle/ (or --out-dir): continuum-gpu.tar.xz.part-NN, SHA256SUMS, unpack.sh, README.txt.
// There: `sh unpack.sh <dir>` checks the parts, unpacks into <dir>/continuum, and prints the command that
// runs the check (continuum/gpu-check.sh). Needs tar and xz here; there, tar with xz or python3.
//
// Usage: node scripts/gpu-bundle.mjs [--out-dir <dir>] [--reference <steps.jsonl>]
//   --reference: a JSONL of reference step times (kind prefill N P ms / decode B L ms) taken along, which the
//   check holds llama.cpp's steps against (e.g. PyTorch on the same GPU model).
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { ROOT } from "./fetch-llama-headers.mjs";
import { ensureLlamaSource } from "./llama-source.mjs";

const PART_BYTES = 40 * 1000 * 1000;
const ARCHIVE = "continuum-gpu.tar.xz";
// the prebuilt package's files our addon never loads (node-llama-cpp's own addon and its helper library)
const UNUSED_PREBUILT = new Set(["llama-addon.node", "libllama-common.so"]);

const { values: args } = parseArgs({
  options: { "out-dir": { type: "string" }, reference: { type: "string" } },
});
const outDir = resolve(args["out-dir"] ?? join(ROOT, ".cache", "gpu-bundle"));

function log(msg) {
  process.stderr.write(`gpu-bundle: ${msg}\n`);
}

function need(path, hint) {
  if (!existsSync(path)) throw new Error(`${relative(ROOT, path)} is missing: ${hint}`);
}

/** Production dependency folders (npm's own resolution: --omit=dev), relative to the root. */
function productionPackages() {
  const out = execFileSync("npm", ["ls", "--omit=dev", "--parseable", "--all"], {
    cwd: ROOT,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return out
    .split("\n")
    .filter((line) => line.startsWith(join(ROOT, "node_modules")))
    .map((line) => relative(ROOT, line));
}

function copyPackage(rel, stage) {
  cpSync(join(ROOT, rel), join(stage, rel), {
    recursive: true,
    // nested node_modules are packages of their own, listed separately when they are production ones
    filter: (src) =>
      !UNUSED_PREBUILT.has(basename(src)) && !relative(join(ROOT, rel), src).includes("node_modules"),
  });
}

function sizeOf(dir) {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    total += entry.isDirectory() ? sizeOf(p) : statSync(p).size;
  }
  return total;
}

const RUN_SCRIPT = `#!/bin/sh
# Runs the GPU check from this unpacked bundle with the node binary it carries. Arguments go to the check
# (e.g. --out-dir <dir>, --skip-build). Models are generated under $CONTINUUM_CACHE_DIR (default ./models).
set -e
cd "$(dirname "$0")"
export PATH="$PWD/node/bin:$PATH"
export CONTINUUM_CACHE_DIR="\${CONTINUUM_CACHE_DIR:-$PWD/models}"
ref=""
[ -f reference/steps.jsonl ] && ref="--reference reference/steps.jsonl"
exec node dist/bench/gpu-check/gpu-check.js $ref "$@"
`;

const UNPACK_SCRIPT = `#!/bin/sh
# sh unpack.sh <dir>: checks the parts against SHA256SUMS and unpacks the bundle into <dir>/continuum.
set -e
here="$(cd "$(dirname "$0")" && pwd)"
dest="\${1:-.}"
mkdir -p "$dest"
(cd "$here" && sha256sum -c SHA256SUMS)
if command -v xz >/dev/null 2>&1; then
  cat "$here"/${ARCHIVE}.part-* | tar -xJf - -C "$dest"
else
  cat "$here"/${ARCHIVE}.part-* | python3 -c 'import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall(sys.argv[1])' "$dest"
fi
echo "unpacked into $dest/continuum; run: sh $dest/continuum/gpu-check.sh"
`;

function main() {
  need(join(ROOT, "dist", "bench", "gpu-check", "gpu-check.js"), "run npm run build");
  need(join(ROOT, ".cache", "native", "continuum_llama.node"), "run npm ci (it builds the addon)");
  const source = ensureLlamaSource({ log: (m) => log(m) });

  const stage = join(outDir, "stage", "continuum");
  rmSync(join(outDir, "stage"), { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  for (const f of ["package.json", "bin", "dist", "scripts"])
    cpSync(join(ROOT, f), join(stage, f), { recursive: true });
  cpSync(join(ROOT, ".cache", "native"), join(stage, ".cache", "native"), { recursive: true });
  const srcRel = relative(ROOT, source.dir);
  for (const f of ["ggml", "source.json"]) {
    cpSync(join(source.dir, f), join(stage, srcRel, f), { recursive: true });
  }
  const packages = productionPackages();
  for (const rel of packages) copyPackage(rel, stage);
  mkdirSync(join(stage, "node", "bin"), { recursive: true });
  copyFileSync(process.execPath, join(stage, "node", "bin", "node"));
  chmodSync(join(stage, "node", "bin", "node"), 0o755);
  if (args.reference) {
    mkdirSync(join(stage, "reference"), { recursive: true });
    copyFileSync(resolve(args.reference), join(stage, "reference", "steps.jsonl"));
  }
  writeFileSync(join(stage, "gpu-check.sh"), RUN_SCRIPT, { mode: 0o755 });
  log(
    `staged ${(sizeOf(stage) / 1e6).toFixed(0)} MB: node ${process.version}, ${packages.length} packages, ` +
      `dist, the addon, ggml of llama.cpp ${source.meta.llamaCppTag}${args.reference ? ", the reference steps" : ""}`,
  );

  for (const f of readdirSync(outDir)) if (f.startsWith(ARCHIVE)) rmSync(join(outDir, f));
  log("compressing (xz, every core)...");
  const tar = spawnSync(
    "sh",
    [
      "-c",
      `tar -C "${join(outDir, "stage")}" -cf - continuum | xz -T0 -6 | split -b ${PART_BYTES} -d -a 2 - "${join(outDir, `${ARCHIVE}.part-`)}"`,
    ],
    { stdio: "inherit" },
  );
  if (tar.status !== 0) throw new Error(`tar | xz | split exited with ${tar.status}`);
  rmSync(join(outDir, "stage"), { recursive: true, force: true });

  const parts = readdirSync(outDir)
    .filter((f) => f.startsWith(`${ARCHIVE}.part-`))
    .sort();
  const sums = parts.map(
    (f) =>
      `${createHash("sha256")
        .update(readFileSync(join(outDir, f)))
        .digest("hex")}  ${f}`,
  );
  writeFileSync(join(outDir, "SHA256SUMS"), `${sums.join("\n")}\n`);
  writeFileSync(join(outDir, "unpack.sh"), UNPACK_SCRIPT, { mode: 0o755 });
  writeFileSync(
    join(outDir, "README.txt"),
    "Continuum GPU bundle: copy this folder to the GPU machine, then\n" +
      "  sh unpack.sh /some/dir && sh /some/dir/continuum/gpu-check.sh\n" +
      "It needs an NVIDIA driver, the CUDA toolkit (nvcc), cmake and a C++ compiler there; no network.\n",
  );
  const total = parts.reduce((s, f) => s + statSync(join(outDir, f)).size, 0);
  log(`${parts.length} part(s), ${(total / 1e6).toFixed(1)} MB in ${outDir}`);
  process.stdout.write(`${outDir}\n`);
}

try {
  main();
} catch (error) {
  log(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
