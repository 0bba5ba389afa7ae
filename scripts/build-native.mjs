// Builds Continuum's own N-API addon (src/engine/native/addon/*.cpp) against the prebuilt llama.cpp shared
// libraries of @node-llama-cpp/linux-x64, with headers of the same release (scripts/fetch-llama-headers.mjs).
// No llama.cpp compilation: seven small translation units, compiled in parallel, then linked. Seconds.
//
// Before compiling it checks that headers and libraries are the same llama.cpp release (structs such as
// llama_context_params are passed by value, so a mismatch is silent memory corruption); after linking it
// loads the addon in a child process, whose init compares llama_version()/ggml_version() with the
// header versions compiled in.
//
// Output: .cache/native/continuum_llama.node (rebuilt only when an input changes).
// Env: CONTINUUM_SKIP_NATIVE=1 skips; CONTINUUM_NATIVE_REQUIRED=1 makes "unsupported platform" an error;
//      CXX overrides the compiler (default g++).
// Usage: node scripts/build-native.mjs [--force]
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureLlamaHeaders, findLibPackageDir, LIB_PACKAGE, ROOT } from "./fetch-llama-headers.mjs";

const SRC_DIR = join(ROOT, "src", "engine", "native", "addon");
const SOURCES = [
  "addon.cpp",
  "context.cpp",
  "host-memory.cpp",
  "logprobs.cpp",
  "row-kernels.cpp",
  "sampler-api.cpp",
  "sampling.cpp",
];
const HEADERS = ["addon.h", "logprobs.h", "row-kernels.h", "sampling.h"];
// The sampler's row passes are written for the vectoriser, which GCC runs fully only at -O3 and keeps off
// a loop with a float comparison unless FP operations may be assumed not to trap (we never enable traps).
const SOURCE_FLAGS = { "row-kernels.cpp": ["-O3", "-fno-trapping-math"] };
const OUT_DIR = join(ROOT, ".cache", "native");
export const ADDON_PATH = join(OUT_DIR, "continuum_llama.node");

function log(msg) {
  console.log(`build-native: ${msg}`);
}

class MismatchError extends Error {}

/** Cross-checks the header release (from node-llama-cpp) against the libraries' build metadata. */
export function verifyVersions(headerMeta, libPkgDir, binsDir) {
  const problems = [];
  const libPkg = JSON.parse(readFileSync(join(libPkgDir, "package.json"), "utf8"));
  if (libPkg.version !== headerMeta.nodeLlamaCppVersion) {
    problems.push(
      `${LIB_PACKAGE}@${libPkg.version} vs headers from node-llama-cpp@${headerMeta.nodeLlamaCppVersion}`,
    );
  }
  const buildMetaPath = join(binsDir, "_nlcBuildMetadata.json");
  if (!existsSync(buildMetaPath)) {
    problems.push(`${buildMetaPath} is missing, cannot tell which llama.cpp release the libraries are`);
  } else {
    const buildMeta = JSON.parse(readFileSync(buildMetaPath, "utf8"));
    const libRelease = buildMeta?.buildOptions?.llamaCpp?.release;
    if (libRelease !== headerMeta.llamaCppTag || libRelease !== headerMeta.binariesRelease) {
      problems.push(
        `libraries built from llama.cpp ${libRelease}, headers are ${headerMeta.llamaCppTag} (binaries release ${headerMeta.binariesRelease})`,
      );
    }
  }
  // Semver-style tags (vX.Y.Z) must agree with the LLAMA_VERSION the header tree declares.
  const semverTag = /^v(\d+\.\d+\.\d+)$/.exec(headerMeta.llamaCppTag ?? "");
  if (semverTag && semverTag[1] !== headerMeta.llamaVersion) {
    problems.push(
      `header tree declares LLAMA_VERSION ${headerMeta.llamaVersion} but is tagged ${headerMeta.llamaCppTag}`,
    );
  }
  // The library's SONAME carries its version (libllama.v<version>.so) in this packaging.
  const llamaLib = readdirSync(binsDir).find((f) => /^libllama(\.v[\d.]+)?\.so$/.test(f));
  if (!llamaLib) problems.push(`no libllama*.so in ${binsDir}`);
  const soVersion = llamaLib && /^libllama\.v([\d.]+)\.so$/.exec(llamaLib)?.[1];
  if (soVersion && soVersion !== headerMeta.llamaVersion) {
    problems.push(`${llamaLib} is LLAMA ${soVersion}, headers are LLAMA ${headerMeta.llamaVersion}`);
  }
  if (problems.length > 0) {
    throw new MismatchError(
      "llama.cpp header/library version mismatch:\n  - " +
        problems.join("\n  - ") +
        "\nStructs are passed by value across this boundary, so building anyway would corrupt memory. " +
        `Pin ${LIB_PACKAGE} and the headers to the same version (see scripts/fetch-llama-headers.mjs).`,
    );
  }
  return { llamaLib, libVersion: libPkg.version };
}

function compile(cxx, args) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cxx, args, { stdio: ["ignore", "inherit", "inherit"] });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolvePromise() : reject(new Error(`${cxx} exited with ${code}`)),
    );
  });
}

export async function buildNative({ force = false } = {}) {
  if (process.env.CONTINUUM_SKIP_NATIVE === "1") {
    log("skipped (CONTINUUM_SKIP_NATIVE=1)");
    return null;
  }
  if (process.platform !== "linux" || process.arch !== "x64") {
    const msg = `the llama.cpp engine supports linux-x64 only (this is ${process.platform}-${process.arch})`;
    if (process.env.CONTINUUM_NATIVE_REQUIRED === "1") throw new Error(`build-native: ${msg}`);
    log(`skipped: ${msg}`);
    return null;
  }
  const libPkgDir = findLibPackageDir();
  if (!libPkgDir) throw new Error(`build-native: ${LIB_PACKAGE} is not installed (run npm ci)`);
  const binsDir = join(libPkgDir, "bins", "linux-x64");

  const { dir: headerDir, meta } = ensureLlamaHeaders({
    log: (m) => log(m.replace(/^fetch-llama-headers: /, "")),
  });
  const { llamaLib } = verifyVersions(meta, libPkgDir, binsDir);

  const require = createRequire(join(ROOT, "package.json"));
  const napiInclude = require("node-api-headers").include_dir;
  const addonApiInclude = dirname(require.resolve("node-addon-api/package.json"));
  const ggmlLib = readdirSync(binsDir).find((f) => /^libggml(\.v[\d.]+)?\.so$/.test(f));
  if (!ggmlLib || !existsSync(join(binsDir, "libggml-base.so")))
    throw new Error(`build-native: libggml missing in ${binsDir}`);

  const cxx = process.env.CXX || "g++";
  const defines = [
    "-DNAPI_VERSION=8",
    "-DNAPI_CPP_EXCEPTIONS",
    "-DNODE_ADDON_API_DISABLE_DEPRECATED",
    `-DCONTINUUM_LLAMA_HEADER_VERSION="${meta.llamaVersion}"`,
    `-DCONTINUUM_GGML_HEADER_VERSION="${meta.ggmlVersion}"`,
  ];
  const includes = [
    napiInclude,
    addonApiInclude,
    join(headerDir, "include"),
    join(headerDir, "ggml", "include"),
  ];
  const cflags = [
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
  ];
  // A relative rpath keeps the clone relocatable: the addon finds the package's libs wherever it lives.
  const rpath = `$ORIGIN/${relative(OUT_DIR, binsDir)}`;
  const ldflags = [
    "-shared",
    `-L${binsDir}`,
    `-l:${llamaLib}`,
    `-l:${ggmlLib}`,
    "-l:libggml-base.so",
    `-Wl,-rpath,${rpath}`,
    "-ldl",
  ];

  const hash = createHash("sha256");
  for (const f of [...SOURCES, ...HEADERS]) hash.update(f).update(readFileSync(join(SRC_DIR, f)));
  hash.update(JSON.stringify({ cxx, defines, cflags, SOURCE_FLAGS, ldflags, meta, includes }));
  const stamp = hash.digest("hex");
  const stampPath = `${ADDON_PATH}.stamp`;
  if (
    !force &&
    existsSync(ADDON_PATH) &&
    existsSync(stampPath) &&
    readFileSync(stampPath, "utf8") === stamp
  ) {
    log(`up to date: ${relative(ROOT, ADDON_PATH)}`);
    return ADDON_PATH;
  }

  mkdirSync(OUT_DIR, { recursive: true });
  const started = Date.now();
  log(
    `compiling ${SOURCES.join(", ")} against llama.cpp ${meta.llamaCppTag} (${LIB_PACKAGE}@${meta.nodeLlamaCppVersion})`,
  );
  const objects = SOURCES.map((s) => join(OUT_DIR, s.replace(/\.cpp$/, ".o")));
  await Promise.all(
    SOURCES.map((s, i) =>
      compile(cxx, [
        ...cflags,
        ...(SOURCE_FLAGS[s] ?? []),
        ...defines,
        ...includes.map((d) => `-I${d}`),
        "-c",
        join(SRC_DIR, s),
        "-o",
        objects[i],
      ]),
    ),
  );
  const tmpOut = join(OUT_DIR, `continuum_llama.tmp-${process.pid}.node`);
  await compile(cxx, [...objects, "-o", tmpOut, ...ldflags]);
  for (const o of objects) rmSync(o, { force: true });

  // Load it in a child: the addon's init refuses to start if the loaded libllama/ggml are not the
  // versions the headers declared.
  try {
    const out = execFileSync(
      process.execPath,
      ["-e", `const a=require(${JSON.stringify(tmpOut)});console.log(JSON.stringify(a.versionInfo()))`],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
    const v = JSON.parse(out);
    log(
      `loaded: libllama ${v.libLlamaVersion}, ggml ${v.libGgmlVersion} (${v.libGgmlCommit}); headers ${v.headerLlamaVersion} / ${v.headerGgmlVersion}`,
    );
  } catch (err) {
    rmSync(tmpOut, { force: true });
    throw new MismatchError(
      `build-native: the built addon failed its load-time version check:\n${err.stderr || err.message}`,
    );
  }
  renameSync(tmpOut, ADDON_PATH);
  writeFileSync(stampPath, stamp);
  log(`built ${relative(ROOT, ADDON_PATH)} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return ADDON_PATH;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  buildNative({ force: process.argv.includes("--force") }).catch((err) => {
    console.error(err instanceof MismatchError ? err.message : err);
    process.exit(1);
  });
}
