/**
 * `npm ci` on a clean clone: npm (10.9 and later) warns of every installed package whose install script
 * package.json's `allowScripts` does not review, so each one the lockfile marks is named there (allowed or
 * denied). Entries are by name: the lockfile records no resolved URLs, which npm needs to verify a version.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

const root = new URL("../", import.meta.url);
const readJson = (name: string) => JSON.parse(readFileSync(new URL(name, root), "utf8"));

test("every dependency with an install script is reviewed in package.json's allowScripts", () => {
  const reviewed = Object.keys(readJson("package.json").allowScripts ?? {});
  const packages = readJson("package-lock.json").packages as Record<string, { hasInstallScript?: boolean }>;
  const withScripts = Object.entries(packages)
    .filter(([path, entry]) => path !== "" && entry.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length));
  assert.ok(withScripts.length > 0, "the lockfile marks packages with install scripts");
  assert.deepEqual(
    withScripts.filter((name) => !reviewed.includes(name)),
    [],
    "not in allowScripts",
  );
});
