/**
 * `npm test` enforces the layers of the code base and the rule between them: an import may only point down (or sideways
 * within a layer), never up. core <- policies, analysis, workload, tool-calls <- sim, engine, gateway, gguf <- server, bench,
 * cluster, profiler, gpu-build <- cli, all above the install-time scripts/. The simulator, the engine and the gateway are
 * the three executors of one step loop: none imports another (the server is the HTTP front end of the engine and of the
 * gateway). Tests follow the same rule (though a test may compare the executors), so a test lives in the
 * lowest layer holding everything it imports: the end-to-end tests of `continuum serve` live in cli/. And no
 * module imports itself back through others, type imports included.
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
  /**
   * reads the tool calls in a model's output: the engine and the gateway name a finished turn's tool for the
   * scheduler with it, the server returns the calls, the trace importers read recorded ones. Core never
   * reads model text.
   */
  "tool-calls": 1,
  sim: 2,
  engine: 2,
  gateway: 2,
  /** the built-in models; its tests load what it writes into llama.cpp, so it sits beside the engine */
  gguf: 2,
  server: 3,
  bench: 3,
  cluster: 3,
  /** measures the engine */
  profiler: 3,
  /** builds the GPU plugin that the engine finds at run time (engine/gpu) */
  "gpu-build": 3,
  cli: 4,
};

/** Sibling folders of one layer that must not import each other. */
const APART: readonly (readonly [string, string])[] = [
  ["sim", "engine"],
  ["gateway", "engine"],
  ["gateway", "sim"],
];

interface ImportEdge {
  /** paths relative to src, with forward slashes */
  readonly from: string;
  readonly to: string;
}

function areaOf(path: string): string {
  return path.startsWith(SCRIPTS) ? SCRIPTS : (path.split("/")[0] as string);
}

/**
 * The install-time scripts (npm's prepare runs them before any TypeScript is built; gpu-build shares their
 * unpacking of the pinned llama.cpp source) sit below every layer: they import nothing from src.
 */
const SCRIPTS = "../scripts/";

function isTest(path: string): boolean {
  return path.endsWith(".test.ts");
}

/** A folder with more files than this at its root hides its parts: split it into folders that name them. */
const MAX_FILES_PER_FOLDER = 20;

/** Folders under `dir` (itself included) holding more than MAX_FILES_PER_FOLDER files at their root. */
function crowdedFolders(dir: string, root = dir): string[] {
  const entries = readdirSync(dir, { withFileTypes: true });
  const files = entries.filter((entry) => entry.isFile()).length;
  const here = files > MAX_FILES_PER_FOLDER ? [`src/${relative(root, dir)} holds ${files} files`] : [];
  return [
    ...here,
    ...entries
      .filter((entry) => entry.isDirectory())
      .flatMap((entry) => crowdedFolders(join(dir, entry.name), root)),
  ];
}

/** Why an import breaks the layering, or null. A test may compare the executors. */
function violation(edge: ImportEdge): string | null {
  const from = areaOf(edge.from);
  const to = areaOf(edge.to);
  if (from === to) return null;
  const a = LAYERS[from];
  const b = to === SCRIPTS ? -1 : LAYERS[to];
  if (a === undefined) return `${edge.from}: folder src/${from} has no layer (add it to LAYERS)`;
  if (b === undefined) return `${edge.to}: folder src/${to} has no layer (add it to LAYERS)`;
  if (b > a) return `${edge.from} imports ${edge.to}: ${from} (layer ${a}) may not import ${to} (layer ${b})`;
  if (!isTest(edge.from) && APART.some(([x, y]) => (x === from && y === to) || (x === to && y === from))) {
    return `${edge.from} imports ${edge.to}: ${from} and ${to} are executors of the step loop and stay apart`;
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

/** Relative imports of every module under `srcDir`, tests and type imports included. */
function importEdges(srcDir: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of sourceFiles(srcDir)) {
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

/** The modules of each import cycle (each sorted; cycles in order of their first module). */
function importCycles(edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  // Tarjan's strongly connected components
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (module: string): void => {
    index.set(module, index.size);
    low.set(module, index.get(module)!);
    stack.push(module);
    onStack.add(module);
    for (const target of next.get(module) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(module, Math.min(low.get(module)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(module, Math.min(low.get(module)!, index.get(target)!));
      }
    }
    if (low.get(module) !== index.get(module)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== module);
    if (component.length > 1 || next.get(module)?.includes(module)) cycles.push(component.sort());
  };
  for (const module of next.keys()) if (!index.has(module)) visit(module);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Cycles still to break. Break one, and this test fails until it is taken off the list. */
const KNOWN_CYCLES: readonly (readonly string[])[] = [];

describe("layers", () => {
  const src = dirname(fileURLToPath(import.meta.url));
  const edges = importEdges(src);

  test("no import in src runs from a lower layer up, and the simulator and the engine stay apart", () => {
    const product = edges.filter((edge) => !isTest(edge.from));
    assert.ok(product.length > 300, `only ${product.length} imports found: is the parser broken?`);
    assert.deepEqual(
      product.map(violation).filter((v) => v !== null),
      [],
    );
  });

  test("no test imports a layer above its own", () => {
    const tests = edges.filter((edge) => isTest(edge.from));
    assert.ok(tests.length > 300, `only ${tests.length} imports of tests found: is the parser broken?`);
    assert.deepEqual(
      tests.map(violation).filter((v) => v !== null),
      [],
    );
  });

  test("no import cycle among the modules of src, type imports included, but the known ones", () => {
    assert.deepEqual(importCycles(edges), KNOWN_CYCLES);
  });

  test(`no folder in src holds more than ${MAX_FILES_PER_FOLDER} files at its root`, () => {
    assert.deepEqual(crowdedFolders(src), []);
  });

  test("the cycle finder: cycles and self-imports are found, a diamond is none; type imports count", () => {
    const edge = (from: string, to: string): ImportEdge => ({ from, to });
    assert.deepEqual(importCycles([edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d")]), [
      ["a", "b", "c"],
    ]);
    assert.deepEqual(importCycles([edge("a", "b"), edge("a", "c"), edge("b", "d"), edge("c", "d")]), []);
    assert.deepEqual(importCycles([edge("a", "a")]), [["a"]]);
    const typeImport = 'import type { Retention } from "./retention.js";';
    assert.deepEqual(
      [...typeImport.matchAll(IMPORT)].map((m) => m[1]),
      ["./retention.js"],
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
    assert.match(
      violation({ from: "engine/gpu/a.ts", to: "gpu-build/b.ts" }) ?? "",
      /engine \(layer 2\) may not import gpu-build/,
    );
    assert.match(violation({ from: "engine/a.ts", to: "sim/b.ts" }) ?? "", /stay apart/);
    assert.equal(violation({ from: "engine/a.test.ts", to: "sim/b.ts" }), null);
    assert.match(
      violation({ from: "core/a.test.ts", to: "policies/b.ts" }) ?? "",
      /core \(layer 0\) may not import policies/,
    );
    assert.match(violation({ from: "gadgets/a.ts", to: "core/b.ts" }) ?? "", /src\/gadgets has no layer/);
    assert.equal(violation({ from: "gpu-build/a.ts", to: "../scripts/b.mjs" }), null);
    assert.match(violation({ from: "engine/a.ts", to: "../tools/b.mjs" }) ?? "", /has no layer/);
  });
});
