/**
 * `npm test` enforces the layers of the code base and the rule between them: an import may only point down (or sideways
 * within a layer), never up. core <- policies, analysis, workload <- sim, engine <- server, bench,
 * cluster <- cli, all above the install-time scripts/. The simulator and the engine are the two executors of one step loop: neither imports
 * the other.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative, sep } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const LAYERS: Readonly<Record<string, number>> = {
  core: 0,
  policies: 1,
  analysis: 1,
  workload: 1,
  sim: 2,
  engine: 2,
  server: 3,
  bench: 3,
  cluster: 3,
  cli: 4,
};

/** Sibling folders of one layer that must not import each other. */
const APART: readonly (readonly [string, string])[] = [["sim", "engine"]];

interface ImportEdge {
  /** paths relative to src, with forward slashes */
  readonly from: string;
  readonly to: string;
}

function areaOf(path: string): string {
  return path.startsWith(SCRIPTS) ? SCRIPTS : (path.split("/")[0] as string);
}

/**
 * The install-time scripts (npm's prepare runs them before any TypeScript is built; `build-gpu` shares their
 * unpacking of the pinned llama.cpp source) sit below every layer: they import nothing from src.
 */
const SCRIPTS = "../scripts/";

/** Why an import breaks the layering, or null. */
function violation(edge: ImportEdge): string | null {
  const from = areaOf(edge.from);
  const to = areaOf(edge.to);
  if (from === to) return null;
  const a = LAYERS[from];
  const b = to === SCRIPTS ? -1 : LAYERS[to];
  if (a === undefined) return `${edge.from}: folder src/${from} has no layer (add it to LAYERS)`;
  if (b === undefined) return `${edge.to}: folder src/${to} has no layer (add it to LAYERS)`;
  if (b > a) return `${edge.from} imports ${edge.to}: ${from} (layer ${a}) may not import ${to} (layer ${b})`;
  if (APART.some(([x, y]) => (x === from && y === to) || (x === to && y === from))) {
    return `${edge.from} imports ${edge.to}: ${from} and ${to} are the two executors and stay apart`;
  }
  return null;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)"|import\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g;

/**
 * Relative imports of the product code under `srcDir` (tests, `*.test.ts`, may bring layers together;
 * test-support modules are product code here: they are imported by the tests of lower layers).
 */
function importEdges(srcDir: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of sourceFiles(srcDir)) {
    if (file.endsWith(".test.ts")) continue;
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(IMPORT)) {
      const spec = (match[1] ?? match[2]) as string;
      const target = normalize(join(dirname(file), spec)).replace(/\.js$/, ".ts");
      const rel = (p: string) => relative(srcDir, p).split(sep).join("/");
      edges.push({ from: rel(file), to: rel(target) });
    }
  }
  return edges;
}

describe("layers", () => {
  test("no import in src runs from a lower layer up, and the simulator and the engine stay apart", () => {
    const src = dirname(fileURLToPath(import.meta.url));
    const edges = importEdges(src);
    assert.ok(edges.length > 300, `only ${edges.length} imports found: is the parser broken?`);
    assert.deepEqual(
      edges.map(violation).filter((v) => v !== null),
      [],
    );
  });

  test("the rule itself: down and sideways pass, up and across executors fail, unknown folders are named", () => {
    assert.equal(violation({ from: "sim/simulate.ts", to: "core/scheduler.ts" }), null);
    assert.equal(violation({ from: "workload/trace.ts", to: "analysis/stats.ts" }), null);
    assert.equal(violation({ from: "cli/main.ts", to: "cluster/cluster.ts" }), null);
    assert.match(
      violation({ from: "core/a.ts", to: "sim/b.ts" }) ?? "",
      /core \(layer 0\) may not import sim/,
    );
    assert.match(
      violation({ from: "bench/a.ts", to: "cli/b.ts" }) ?? "",
      /bench \(layer 3\) may not import cli/,
    );
    assert.match(violation({ from: "engine/a.ts", to: "sim/b.ts" }) ?? "", /stay apart/);
    assert.match(violation({ from: "gadgets/a.ts", to: "core/b.ts" }) ?? "", /src\/gadgets has no layer/);
    assert.equal(violation({ from: "engine/gpu/a.ts", to: "../scripts/b.mjs" }), null);
    assert.match(violation({ from: "engine/a.ts", to: "../tools/b.mjs" }) ?? "", /has no layer/);
  });
});
