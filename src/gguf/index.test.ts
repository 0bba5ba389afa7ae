import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { metaNumber, metaString, readGgufInfo } from "./format/gguf-reader.js";
import { BUILTIN_PRESETS, builtinModelPath, defaultModelCacheDir, ensureBuiltinModel } from "./index.js";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "continuum-models-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("ensureBuiltinModel", () => {
  it("generates the preset once and then reuses the cached file", async () => {
    const cacheDir = join(dir, "nested", "cache");
    const path = await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 7 });
    assert.equal(path, join(cacheDir, "continuum-tiny-7.gguf"));
    assert.equal(path, builtinModelPath({ preset: "tiny", cacheDir, seed: 7 }));
    const info = await readGgufInfo(path);
    assert.equal(metaString(info, "general.architecture"), "llama");
    assert.equal(metaString(info, "continuum.preset"), "tiny");
    assert.equal(metaNumber(info, "continuum.seed"), 7);
    assert.equal(metaNumber(info, "llama.embedding_length"), BUILTIN_PRESETS.tiny.embeddingLength);
    const first = await stat(path);

    const again = await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 7 });
    assert.equal(again, path);
    const second = await stat(path);
    assert.equal(second.ino, first.ino);
    assert.equal(second.mtimeMs, first.mtimeMs);
    assert.deepEqual(await readdir(cacheDir), ["continuum-tiny-7.gguf"]); // no temp files left
  });

  it("says what it generates, how big, and where, before generating", async () => {
    const cacheDir = join(dir, "message");
    const written: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string | Uint8Array) => written.push(String(chunk)) > 0) as typeof write;
    try {
      await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 2 });
      await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 2 });
    } finally {
      process.stderr.write = write;
    }
    assert.deepEqual(written, [
      `generating built-in model tiny (6.0 MB, 2.9M params) into ${join(cacheDir, "continuum-tiny-2.gguf")}\n`,
    ]);
  });

  it("replaces a corrupt or mismatching file", async () => {
    const cacheDir = join(dir, "corrupt");
    const path = builtinModelPath({ preset: "tiny", cacheDir, seed: 3 });
    await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 4 });
    await writeFile(path, "not a gguf file");
    assert.equal(await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 3 }), path);
    assert.equal(metaNumber(await readGgufInfo(path), "continuum.seed"), 3);
    // a valid model of another seed copied under this name is not reused either
    const other = builtinModelPath({ preset: "tiny", cacheDir, seed: 4 });
    await writeFile(path, await readFile(other));
    await ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 3 });
    assert.equal(metaNumber(await readGgufInfo(path), "continuum.seed"), 3);
    assert.deepEqual((await readdir(cacheDir)).sort(), ["continuum-tiny-3.gguf", "continuum-tiny-4.gguf"]);
  });

  it("concurrent callers get one complete file", async () => {
    const cacheDir = join(dir, "concurrent");
    const paths = await Promise.all(
      [1, 2, 3].map(() => ensureBuiltinModel({ preset: "tiny", cacheDir, seed: 9 })),
    );
    assert.equal(new Set(paths).size, 1);
    assert.deepEqual(await readdir(cacheDir), ["continuum-tiny-9.gguf"]);
    assert.equal(metaNumber(await readGgufInfo(paths[0]!), "continuum.seed"), 9);
  });

  it("defaults the cache dir to $CONTINUUM_CACHE_DIR, else ~/.cache/continuum/models", () => {
    const saved = process.env["CONTINUUM_CACHE_DIR"];
    try {
      process.env["CONTINUUM_CACHE_DIR"] = join(dir, "env");
      assert.equal(defaultModelCacheDir(), join(dir, "env"));
      assert.equal(builtinModelPath({ preset: "small" }), join(dir, "env", "continuum-small-1.gguf"));
      delete process.env["CONTINUUM_CACHE_DIR"];
      assert.equal(defaultModelCacheDir(), join(homedir(), ".cache", "continuum", "models"));
    } finally {
      if (saved === undefined) delete process.env["CONTINUUM_CACHE_DIR"];
      else process.env["CONTINUUM_CACHE_DIR"] = saved;
    }
  });
});
