// Runs every *.test.ts under src/ with node's test runner (Node 20's --test takes no globs).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

function findTests(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return findTests(path);
    return entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

const filter = process.argv[2];
const files = findTests("src")
  .filter((f) => !filter || f.includes(filter))
  .sort();
const result = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=2", ...files], {
  stdio: "inherit",
});
process.exit(result.status ?? 1);
