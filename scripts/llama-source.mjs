// The pinned llama.cpp source tree, unpacked once into .cache/llama-src/<version>/ (gitignored) and shared by
// every build from source: scripts/build-llama-server.mjs (the peer of `npm run compare`) and
// `continuum build-gpu` (the ggml GPU plugin) and `continuum build-cpu` (ggml's CPU backend for this CPU).
//
// Source: the node-llama-cpp npm tarball of the same version as @node-llama-cpp/linux-x64, checked against
// the sha512 pinned in scripts/fetch-llama-headers.mjs; its llama/gitRelease.bundle must have the commit the
// headers came from; `git archive` of it, then node-llama-cpp's own llama.cpp patches, as for the prebuilt
// libraries. source.json in the tree records the release, the commit and the patches.
//
// A tree already there (ggml/CMakeLists.txt and source.json) is used as is, without npm, git or network: a
// machine without them gets the tree copied in ready-made.
//
// Usage: node scripts/llama-source.mjs   (prints the tree's dir)
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  ensureLlamaHeaders,
  installedLibVersion,
  ROOT,
  run,
  unpackLlamaRelease,
} from "./fetch-llama-headers.mjs";

const SOURCE_META = "source.json";

/** Where the tree for the installed @node-llama-cpp/linux-x64 version lives (it may not exist yet). */
export function llamaSourceDir(root = ROOT) {
  return join(root, ".cache", "llama-src", installedLibVersion(root));
}

/** The tree for the installed @node-llama-cpp/linux-x64 version, unpacked if needed; returns `{ dir, meta }`. */
export function ensureLlamaSource({ root = ROOT, log = console.log } = {}) {
  const version = installedLibVersion(root);
  const dir = llamaSourceDir(root);
  const metaPath = join(dir, SOURCE_META);
  if (existsSync(join(dir, "ggml", "CMakeLists.txt"))) {
    if (!existsSync(metaPath)) {
      throw new Error(`${dir} has no ${SOURCE_META} (not unpacked by scripts/llama-source.mjs): remove it`);
    }
    return { dir, meta: JSON.parse(readFileSync(metaPath, "utf8")) };
  }
  const { meta: headerMeta } = ensureLlamaHeaders({ root, version, log });
  const parent = join(dir, "..");
  mkdirSync(parent, { recursive: true });
  const work = mkdtempSync(join(parent, ".work-"));
  try {
    const { gitDir, llamaDir } = unpackLlamaRelease(version, work, log);
    const head = run("git", ["--git-dir", gitDir, "rev-parse", "HEAD"]).trim();
    if (head !== headerMeta.bundleHead) {
      throw new Error(`bundle HEAD ${head} differs from the headers' commit ${headerMeta.bundleHead}`);
    }
    const stage = join(work, "src");
    mkdirSync(stage);
    const tarBuf = run("git", ["--git-dir", gitDir, "archive", "--format=tar", "HEAD"], {
      encoding: "buffer",
    });
    execFileSync("tar", ["-xf", "-", "-C", stage], { input: tarBuf, maxBuffer: 1024 * 1024 * 1024 });
    const patches = applyPatches(join(llamaDir, "patches"), stage);
    const meta = {
      nodeLlamaCppVersion: version,
      llamaCppTag: headerMeta.llamaCppTag,
      commit: head,
      patches,
    };
    writeFileSync(join(stage, SOURCE_META), `${JSON.stringify(meta, null, 2)}\n`);
    rmSync(dir, { recursive: true, force: true });
    run("mv", [stage, dir]);
    log(`llama.cpp ${meta.llamaCppTag} source in ${dir} (patches: ${patches.join(", ") || "none"})`);
    return { dir, meta };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function applyPatches(patchDir, tree) {
  if (!existsSync(patchDir)) return [];
  const applied = [];
  for (const name of readdirSync(patchDir).sort()) {
    if (!name.endsWith(".diff") && !name.endsWith(".patch")) continue;
    run("git", ["apply", "-p1", join(patchDir, name)], { cwd: tree });
    applied.push(name);
  }
  return applied;
}

/**
 * Removes `buildDir` when its CMake cache was configured from a source dir other than `sourceDir` (cmake
 * refuses to reconfigure such a tree); keeps it otherwise, so an interrupted build resumes.
 */
export function removeStaleBuildDir(buildDir, sourceDir) {
  const cachePath = join(buildDir, "CMakeCache.txt");
  if (!existsSync(cachePath)) return;
  const home = readFileSync(cachePath, "utf8").match(/^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m)?.[1];
  if (home !== resolve(sourceDir)) rmSync(buildDir, { recursive: true, force: true });
}

// Two compiler-level adjustments for native x86 builds of the tree, each checked on this machine (sources
// stay unmodified):
// - GCC 12 drops the stores that fill ggml's AMX tile configuration before `_tile_loadconfig` (the builtin is
//   not treated as reading its operand, so dead-store elimination removes the rows/colsb writes); `ldtilecfg`
//   then faults (SIGSEGV) on the first AMX matmul of a Q8_0 model on an AMX CPU (Sapphire Rapids and later).
//   -fno-tree-dse -fno-dse for C++ keeps the stores (disassembly: the full 64-byte config is written).
// - -march=native on a CPU with AVX512-FP16 switches ggml's F16 vectors to 32 lanes x 4 (a 128-element
//   step), so ggml_vec_dot_f16 over a 64-wide attention head never enters its SIMD loop and runs scalar:
//   flash-attention decode was 2.3x slower at 544 context than with the flag. -mno-avx512fp16 keeps
//   everything else native (AVX512, VNNI, BF16, AMX), i.e. the ISA of the prebuilt sapphirerapids backend.
export function compilerWorkarounds(cxxVersionText, acceptsNoAvx512Fp16) {
  const isGcc = /\bGCC\b|g\+\+|Free Software Foundation/.test(cxxVersionText);
  const common = acceptsNoAvx512Fp16 ? ["-mno-avx512fp16"] : [];
  const cxx = [...(isGcc ? ["-fno-tree-dse", "-fno-dse"] : []), ...common];
  return [
    ...(common.length > 0 ? [`-DCMAKE_C_FLAGS=${common.join(" ")}`] : []),
    ...(cxx.length > 0 ? [`-DCMAKE_CXX_FLAGS=${cxx.join(" ")}`] : []),
  ];
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(ensureLlamaSource({ log: (line) => console.error(line) }).dir);
}
