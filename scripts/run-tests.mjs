// Runs every *.test.ts under src/ (those whose path contains the filter, when one is given) with node's test
// runner (Node 20's --test takes no globs).
// --cpu-variant: runs the tests that reach the llama.cpp engine under the AVX2 CPU variant instead, when ggml
// picks an AVX-512 one here: the two round differently, so a test whose verdict depends on the variant fails
// here rather than on another machine (CI runs it after the whole suite: `npm run test:ci`).
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

function findFiles(dir, suffix) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return findFiles(path, suffix);
    return entry.name.endsWith(suffix) ? [path] : [];
  });
}

function runTests(files, env = process.env) {
  const result = spawnSync(
    process.execPath,
    ["--import", "tsx", "--test", "--test-concurrency=2", ...files],
    {
      stdio: "inherit",
      env,
    },
  );
  return result.status ?? 1;
}

/** Test files that import the native addon, directly or through their relative imports. */
function testsReachingNative(testFiles) {
  const imports = new Map();
  for (const file of findFiles("src", ".ts")) {
    const source = readFileSync(file, "utf8");
    const targets = [...source.matchAll(/(?:from|import)\s*\(?\s*["'](\.[^"']+)["']/g)].map((m) =>
      resolve(dirname(file), m[1].replace(/\.js$/, ".ts")),
    );
    imports.set(resolve(file), targets);
  }
  const native = resolve("src/engine/native/native-addon.ts");
  const reaches = new Set([native]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [file, targets] of imports) {
      if (!reaches.has(file) && targets.some((t) => reaches.has(t))) {
        reaches.add(file);
        grew = true;
      }
    }
  }
  return testFiles.filter((f) => reaches.has(resolve(f)));
}

/** The prebuilt CPU variant ggml picks for this CPU (e.g. "zen4"), or null without the native addon. */
function defaultCpuVariant() {
  const probe = spawnSync(
    process.execPath,
    [
      "--import",
      "tsx",
      "-e",
      'import("./src/engine/native/native-addon.ts").then((m) => m.loadBackends({ gpuPlugins: [] }))',
    ],
    {
      encoding: "utf8",
      env: { ...process.env, CONTINUUM_LLAMA_LOG: "info", CONTINUUM_GGML_CPU: "prebuilt" },
    },
  );
  const loaded = /libggml-cpu-([\w-]+)\.so/.exec(`${probe.stdout}${probe.stderr}`);
  return loaded ? loaded[1] : null;
}

const cpuVariantPass = process.argv.includes("--cpu-variant");
const filter = process.argv.slice(2).find((arg) => !arg.startsWith("--"));
const files = findFiles("src", ".test.ts")
  .filter((f) => !filter || f.includes(filter))
  .sort();
if (!cpuVariantPass) process.exit(runTests(files));
const variant = defaultCpuVariant();
const avx2Only = ["haswell", "x64", "sse42", "sandybridge", "ivybridge", "piledriver"];
if (variant === null) {
  console.log("# CPU variant pass skipped: the native addon does not load here");
  process.exit(0);
}
if (avx2Only.includes(variant)) {
  console.log(`# CPU variant pass skipped: ggml runs '${variant}' here, this CPU has no AVX-512`);
  process.exit(0);
}
const native = testsReachingNative(files);
console.log(`# CPU variant pass: ${native.length} tests that reach the engine, under 'haswell' (AVX2)`);
console.log(`# (ggml's default here is '${variant}')`);
process.exit(runTests(native, { ...process.env, CONTINUUM_GGML_CPU: "haswell" }));
