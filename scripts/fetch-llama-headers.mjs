// Fetches llama.cpp's public C headers (include/ and ggml/include/) for exactly the release that the
// prebuilt libraries in @node-llama-cpp/linux-x64 were built from, without committing them.
//
// Source: the `node-llama-cpp` npm tarball of the same version as the binaries package carries that
// llama.cpp release as a git bundle (llama/gitRelease.bundle). We `npm pack` it (npm's own cache makes a
// repeat offline), verify the tarball against a pinned sha512, clone the bundle, `git archive` only the
// include dirs, apply any of the package's llama.cpp patches that touch those dirs, and record the
// versions the headers declare (llama.cpp release, LLAMA_VERSION, GGML_VERSION) in meta.json so that
// scripts/build-native.mjs can check them against the libraries before compiling anything.
//
// Usage: node scripts/fetch-llama-headers.mjs [--force]   (prints the header dir)
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const LIB_PACKAGE = "@node-llama-cpp/linux-x64";
const HEADER_PACKAGE = "node-llama-cpp";
const META_FORMAT = 1;

// sha512 of the node-llama-cpp tarball per version. Bumping @node-llama-cpp/linux-x64 means adding its
// twin here (`npm view node-llama-cpp@<version> dist.integrity`), so headers never come from an
// unexpected tarball.
const HEADER_TARBALL_INTEGRITY = {
  "3.22.1": "sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==",
};

const HEADER_DIRS = ["include", "ggml/include"];

/** Directory of the installed prebuilt-binaries package, or null when it is not installed. */
export function findLibPackageDir(root = ROOT) {
  const require = createRequire(join(root, "package.json"));
  try {
    // The package exports only "." (dist/index.js); its root is one level above dist/.
    return resolve(dirname(require.resolve(LIB_PACKAGE)), "..");
  } catch {
    return null;
  }
}

/** Runs a command to completion without a terminal or system git config; returns its stdout. */
export function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, {
    encoding: opts.encoding ?? "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_CONFIG_NOSYSTEM: "1" },
    ...opts,
  });
}

function npm(args, cwd) {
  // Inside an npm lifecycle script, npm_execpath is the running npm's CLI; use the same one.
  const execPath = process.env.npm_execpath;
  if (execPath && /npm-cli\.js$/.test(execPath)) return run(process.execPath, [execPath, ...args], { cwd });
  return run("npm", args, { cwd });
}

function cmakeVersion(cmakeText, prefix, file) {
  const part = (name) => {
    const m = cmakeText.match(new RegExp(`set\\(${prefix}_VERSION_${name}\\s+(\\d+)\\)`));
    if (!m) throw new Error(`fetch-llama-headers: ${prefix}_VERSION_${name} not found in ${file}`);
    return m[1];
  };
  return `${part("MAJOR")}.${part("MINOR")}.${part("PATCH")}`;
}

function patchedPaths(patchText) {
  return [...patchText.matchAll(/^diff --git a\/(\S+) b\//gm)].map((m) => m[1]);
}

function isHeaderPath(p) {
  return HEADER_DIRS.some((d) => p.startsWith(`${d}/`));
}

/** The installed prebuilt-binaries package's version (the llama.cpp release everything follows). */
export function installedLibVersion(root = ROOT) {
  const pkgDir = findLibPackageDir(root);
  if (!pkgDir) throw new Error(`fetch-llama-headers: ${LIB_PACKAGE} is not installed (run npm ci)`);
  return JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).version;
}

/**
 * `npm pack`s node-llama-cpp@`version` into `work`, checks it against the pinned sha512 and clones its
 * llama.cpp bundle; returns the bare clone, the package's `llama/` dir and the integrity.
 */
export function unpackLlamaRelease(version, work, log = console.log) {
  const integrity = HEADER_TARBALL_INTEGRITY[version];
  if (!integrity) {
    throw new Error(
      `fetch-llama-headers: no pinned integrity for ${HEADER_PACKAGE}@${version}. ` +
        `${LIB_PACKAGE} was bumped: add \`npm view ${HEADER_PACKAGE}@${version} dist.integrity\` ` +
        `to HEADER_TARBALL_INTEGRITY in scripts/fetch-llama-headers.mjs`,
    );
  }
  log(`fetch-llama-headers: npm pack ${HEADER_PACKAGE}@${version}`);
  const packOut = JSON.parse(
    npm(["pack", `${HEADER_PACKAGE}@${version}`, "--json", "--prefer-offline"], work),
  );
  const tgz = join(work, packOut[0].filename);
  const actual = `sha512-${createHash("sha512").update(readFileSync(tgz)).digest("base64")}`;
  if (actual !== integrity) {
    throw new Error(
      `fetch-llama-headers: ${HEADER_PACKAGE}@${version} tarball is ${actual}, expected ${integrity}`,
    );
  }
  run("tar", ["-xzf", tgz, "-C", work, "package/package.json", "package/llama"]);
  rmSync(tgz);
  const llamaDir = join(work, "package", "llama");
  const pkg = JSON.parse(readFileSync(join(work, "package", "package.json"), "utf8"));
  if (pkg.version !== version)
    throw new Error(`fetch-llama-headers: packed ${pkg.version}, wanted ${version}`);
  const gitDir = join(work, "repo.git");
  run("git", ["clone", "--quiet", "--bare", join(llamaDir, "gitRelease.bundle"), gitDir]);
  return { gitDir, llamaDir, integrity };
}

/**
 * Makes sure the headers for `version` are in `<root>/.cache/llama-headers/<version>/` and returns
 * `{ dir, meta }`. Offline once done (and the npm cache makes a re-fetch offline too).
 */
export function ensureLlamaHeaders({ root = ROOT, version, force = false, log = console.log } = {}) {
  version ??= installedLibVersion(root);
  const cacheRoot = join(root, ".cache", "llama-headers");
  const dir = join(cacheRoot, version);
  const metaPath = join(dir, "meta.json");
  if (!force && existsSync(metaPath)) {
    const meta = JSON.parse(readFileSync(metaPath, "utf8"));
    if (meta.format === META_FORMAT && meta.nodeLlamaCppVersion === version) return { dir, meta };
  }

  mkdirSync(cacheRoot, { recursive: true });
  const work = mkdtempSync(join(cacheRoot, ".work-"));
  try {
    const { gitDir, llamaDir, integrity } = unpackLlamaRelease(version, work, log);
    const info = JSON.parse(readFileSync(join(llamaDir, "llama.cpp.info.json"), "utf8"));
    const release = JSON.parse(readFileSync(join(llamaDir, "binariesGithubRelease.json"), "utf8"));

    const git = (...args) => run("git", ["--git-dir", gitDir, ...args]);
    const head = git("rev-parse", "HEAD").trim();
    const llamaVersion = cmakeVersion(git("show", "HEAD:CMakeLists.txt"), "LLAMA", "CMakeLists.txt");
    const ggmlVersion = cmakeVersion(git("show", "HEAD:ggml/CMakeLists.txt"), "GGML", "ggml/CMakeLists.txt");

    const stage = join(work, "headers");
    mkdirSync(stage);
    const tarBuf = run("git", ["--git-dir", gitDir, "archive", "--format=tar", "HEAD", ...HEADER_DIRS], {
      encoding: "buffer",
    });
    execFileSync("tar", ["-xf", "-", "-C", stage], { input: tarBuf });

    // node-llama-cpp builds its binaries with these patches applied; mirror any that touch headers.
    const patchesApplied = [];
    const patchDir = join(llamaDir, "patches");
    if (existsSync(patchDir)) {
      for (const name of readdirSync(patchDir).sort()) {
        if (!name.endsWith(".diff") && !name.endsWith(".patch")) continue;
        const patchFile = join(patchDir, name);
        if (!patchedPaths(readFileSync(patchFile, "utf8")).some(isHeaderPath)) continue;
        run("git", ["apply", "-p1", ...HEADER_DIRS.map((d) => `--include=${d}/*`), patchFile], {
          cwd: stage,
        });
        patchesApplied.push(name);
      }
    }

    const meta = {
      format: META_FORMAT,
      nodeLlamaCppVersion: version,
      tarballIntegrity: integrity,
      llamaCppRepo: info.llamaCppGithubRepo ?? null,
      llamaCppTag: info.tag,
      binariesRelease: release.release,
      bundleHead: head,
      llamaVersion,
      ggmlVersion,
      patchesApplied,
    };
    writeFileSync(join(stage, "meta.json"), `${JSON.stringify(meta, null, 2)}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(stage, dir);
    log(
      `fetch-llama-headers: llama.cpp ${meta.llamaCppTag} (LLAMA ${llamaVersion}, GGML ${ggmlVersion}) -> ${dir}`,
    );
    return { dir, meta };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { dir } = ensureLlamaHeaders({ force: process.argv.includes("--force") });
  console.log(dir);
}
