// Builds llama.cpp's own `llama-server` and `llama-batched-bench` — the peer Continuum is compared against
// (src/bench/compare/compare-llama-server.ts, `npm run compare`) — from exactly the llama.cpp release our prebuilt libraries come from.
//
// Source: the pinned llama.cpp tree of scripts/llama-source.mjs (.cache/llama-src/<version>/, the release
// the prebuilt libraries come from, with node-llama-cpp's patches). The build lives in
// .cache/llama-server/<version>/ (gitignored, never committed):
//   build/   cmake build tree
//   bin/     llama-server, llama-batched-bench (static: no shared llama/ggml libraries)
//   meta.json  release, commit, cmake flags, build seconds
//
// Configuration: CPU only (GGML_NATIVE=ON for this machine, no GPU backends), static, no network
// features: LLAMA_OPENSSL=OFF (no HTTPS), LLAMA_CURL=OFF (deprecated in this release, harmless),
// LLAMA_BUILD_UI=OFF + LLAMA_USE_PREBUILT_UI=OFF (no npm build, no Hugging Face download: the server
// embeds no web UI), no tests/examples/app. Only the two targets are built, with -j2 under `nice`.
// A repeat with the same flags and release is a no-op.
//
// `--profile test` builds llama-server alone without optimisation (-O0, no debug info) into
// .cache/llama-server/<version>-test/: the same sources and server, for tests that need the real thing and
// not its speed (about 3 min on 2 cores where the optimised build takes 9-14).
//
// Usage: node scripts/build-llama-server.mjs [--profile release|test] [--force] [--jobs N]
//        (prints the bin dir last)
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureLlamaHeaders, ROOT, run } from "./fetch-llama-headers.mjs";
import { compilerWorkarounds, ensureLlamaSource, removeStaleBuildDir } from "./llama-source.mjs";

const META_FORMAT = 1;
/** What each profile builds: the optimised peer of `npm run compare`, or llama-server alone for tests. */
export const PROFILES = {
  release: { suffix: "", buildType: "Release", targets: ["llama-server", "llama-batched-bench"] },
  test: { suffix: "-test", buildType: "Debug", targets: ["llama-server"] },
};
export const CMAKE_FLAGS = [
  "-DBUILD_SHARED_LIBS=OFF",
  "-DGGML_NATIVE=ON",
  "-DGGML_CUDA=OFF",
  "-DGGML_VULKAN=OFF",
  "-DGGML_METAL=OFF",
  "-DGGML_RPC=OFF",
  "-DGGML_BACKEND_DL=OFF",
  "-DLLAMA_CURL=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_UI=OFF",
  "-DLLAMA_USE_PREBUILT_UI=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_APP=OFF",
  "-DLLAMA_BUILD_TOOLS=ON",
  "-DLLAMA_BUILD_SERVER=ON",
  "-DLLAMA_BUILD_COMMON=ON",
  "-DLLAMA_ALL_WARNINGS=OFF",
];

function log(msg) {
  console.log(`build-llama-server: ${msg}`);
}

/** Streams a child's output to ours; resolves on exit 0. */
function runStreaming(cmd, args, opts = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "inherit", "inherit"], ...opts });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (code === 0) resolvePromise();
      else reject(new Error(`${cmd} ${args.join(" ")} exited with ${signal ?? code}`));
    });
  });
}

/** Where the build of `version` in `profile` lives. */
export function llamaServerDir(version, root = ROOT, profile = "release") {
  return join(root, ".cache", "llama-server", `${version}${PROFILES[profile].suffix}`);
}

/** Paths of the built binaries (they may not exist yet; the test profile has no batched bench). */
export function llamaServerBinaries(version, root = ROOT, profile = "release") {
  const bin = join(llamaServerDir(version, root, profile), "bin");
  return { bin, server: join(bin, "llama-server"), batchedBench: join(bin, "llama-batched-bench") };
}

function cmakeFlags(profile) {
  const cxx = process.env.CXX ?? "c++";
  let version = "";
  try {
    version = run(cxx, ["--version"]);
  } catch {
    // no compiler on PATH: cmake will say so
  }
  let noFp16 = false;
  try {
    run(cxx, ["-mno-avx512fp16", "-E", "-x", "c++", "/dev/null"]);
    noFp16 = process.arch === "x64";
  } catch {
    // not an x86 compiler that knows the flag
  }
  const type = PROFILES[profile].buildType;
  const unoptimised =
    profile === "test" ? ["-DCMAKE_C_FLAGS_DEBUG=-O0 -g0", "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g0"] : [];
  return [
    `-DCMAKE_BUILD_TYPE=${type}`,
    ...CMAKE_FLAGS,
    ...unoptimised,
    ...compilerWorkarounds(version, noFp16),
  ];
}

function stampOf(headerMeta, flags, targets) {
  return createHash("sha256")
    .update(JSON.stringify({ META_FORMAT, commit: headerMeta.bundleHead, flags, TARGETS: targets }))
    .digest("hex")
    .slice(0, 16);
}

/**
 * Makes sure the profile's targets of the pinned release are built (llama-server and llama-batched-bench,
 * or llama-server alone for `test`); returns `{ dir, server, batchedBench, meta, built }` (built = false
 * when it was already there).
 */
export async function ensureLlamaServer({ root = ROOT, force = false, jobs = 2, profile = "release" } = {}) {
  if (!(profile in PROFILES)) throw new Error(`unknown profile ${profile} (release or test)`);
  const { targets, buildType } = PROFILES[profile];
  const { meta: headerMeta } = ensureLlamaHeaders({ root, log });
  const version = headerMeta.nodeLlamaCppVersion;
  const dir = llamaServerDir(version, root, profile);
  const bins = llamaServerBinaries(version, root, profile);
  const metaPath = join(dir, "meta.json");
  const flags = cmakeFlags(profile);
  const stamp = stampOf(headerMeta, flags, targets);
  const binaries = targets.map((target) => join(bins.bin, target));
  if (!force && existsSync(metaPath) && binaries.every((path) => existsSync(path))) {
    const meta = JSON.parse(readFileSync(metaPath, "utf8"));
    if (meta.stamp === stamp) {
      log(`already built (llama.cpp ${meta.llamaCppTag}, ${meta.commit.slice(0, 12)}): ${bins.bin}`);
      return { dir, ...bins, meta, built: false };
    }
  }
  mkdirSync(dir, { recursive: true });
  const t0 = performance.now();
  const { dir: srcDir, meta: srcMeta } = ensureLlamaSource({ root, log });
  if (srcMeta.commit !== headerMeta.bundleHead) {
    throw new Error(`${srcDir} holds ${srcMeta.commit}, the headers come from ${headerMeta.bundleHead}`);
  }
  const patches = srcMeta.patches;
  const buildDir = join(dir, "build");
  removeStaleBuildDir(buildDir, srcDir);
  // Earlier versions of this script unpacked their own copy of the tree here.
  rmSync(join(dir, "src"), { recursive: true, force: true });
  rmSync(join(dir, "src.json"), { force: true });
  const generator = hasCommand("ninja") ? ["-G", "Ninja"] : [];
  log(`cmake configure ${flags.join(" ")}`);
  await runStreaming("nice", ["-n", "10", "cmake", "-S", srcDir, "-B", buildDir, ...generator, ...flags]);
  log(`building ${targets.join(", ")} with -j${jobs} (several minutes on 2 cores)`);
  await runStreaming("nice", [
    "-n",
    "10",
    "cmake",
    "--build",
    buildDir,
    "--config",
    buildType,
    "-j",
    String(jobs),
    "--target",
    ...targets,
  ]);
  mkdirSync(bins.bin, { recursive: true });
  for (const target of targets) {
    const built = join(buildDir, "bin", target);
    if (!existsSync(built)) throw new Error(`${built} was not produced`);
    run("cp", ["-f", built, join(bins.bin, target)]);
  }
  const seconds = (performance.now() - t0) / 1000;
  const meta = {
    format: META_FORMAT,
    stamp,
    nodeLlamaCppVersion: version,
    llamaCppTag: headerMeta.llamaCppTag,
    commit: headerMeta.bundleHead,
    patches,
    profile,
    cmakeFlags: flags,
    targets,
    buildSeconds: Math.round(seconds),
    builtAt: new Date().toISOString(),
  };
  writeFileSync(metaPath, `${JSON.stringify(meta, null, 2)}\n`);
  log(`built ${targets.join(", ")} in ${formatDuration(seconds)} -> ${bins.bin}`);
  return { dir, ...bins, meta, built: true };
}

function hasCommand(name) {
  try {
    run("sh", ["-c", `command -v ${name}`]);
    return true;
  } catch {
    return false;
  }
}

function formatDuration(seconds) {
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds - m * 60);
  return m > 0 ? `${m} min ${s} s` : `${s} s`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const jobsAt = args.indexOf("--jobs");
  const jobs = jobsAt >= 0 ? Number(args[jobsAt + 1]) : 2;
  const profileAt = args.indexOf("--profile");
  const profile = profileAt >= 0 ? args[profileAt + 1] : "release";
  const t0 = performance.now();
  ensureLlamaServer({ force: args.includes("--force"), jobs, profile }).then(
    (r) => {
      if (!r.built) log(`nothing to do (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      console.log(r.bin);
    },
    (error) => {
      console.error(`build-llama-server: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
}
