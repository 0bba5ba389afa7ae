/**
 * Property tests draw the same cases on every run: each imports fast-check through this folder's
 * fast-check.ts, which fixes the seed (a failure prints it with the case's path, for
 * `fc.assert(property, { seed, path })` to replay).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import fc, { PROPERTY_SEED } from "./fast-check.js";

const SRC = fileURLToPath(new URL("../../", import.meta.url));
const SEEDED = join("core", "test-support", "fast-check.ts");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

test("every module that uses fast-check takes it from the seeded module", () => {
  const direct = sources(SRC)
    .map((path) => relative(SRC, path))
    .filter(
      (path) => path !== SEEDED && /from\s+["']fast-check["']/.test(readFileSync(join(SRC, path), "utf8")),
    );
  assert.deepEqual(direct, [], "import fc from core/test-support/fast-check.js instead");
});

test("a property's cases are the same on every run: the seed is fixed and reported on failure", () => {
  const draw = () => fc.sample(fc.array(fc.integer(), { minLength: 5 }), 3);
  assert.deepEqual(draw(), draw());
  const failure = (() => {
    try {
      fc.assert(fc.property(fc.nat(), (n) => n < 0));
    } catch (error) {
      return (error as Error).message;
    }
    return "";
  })();
  assert.match(failure, new RegExp(`seed: ${PROPERTY_SEED},`));
});
