import { statSync } from "node:fs";
import { extname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { SchedulingPolicy } from "../core/policy.js";

/**
 * Policies brought as ES modules (docs/custom-policies.md): wherever a policy name is accepted, a spec that
 * is a path to a module names the policy its module exports. Importing is async and creating a policy is
 * not, so loadPolicyModules imports and checks every module first (the CLI commands and the sweep's worker
 * threads call it before any run), and createPolicy then finds the factory by its spec, which also labels
 * the policy in tables, JSON and reports.
 */

/** Extensions node runs only once compiled (or under a TypeScript loader such as tsx). */
const TYPESCRIPT_EXTENSIONS = [".ts", ".mts", ".cts"];
const MODULE_EXTENSIONS = [".js", ".mjs", ".cjs", ...TYPESCRIPT_EXTENSIONS];

/**
 * Does this policy spec name a module: a path (./, ../, /), a file: URL, or a file name with a script
 * extension (.js, .mjs; .ts and friends too, to say how to run them)? Built-in names are none of these.
 */
export function isPolicyModuleSpec(spec: string): boolean {
  return (
    spec.startsWith("./") ||
    spec.startsWith("../") ||
    spec.startsWith("/") ||
    spec.startsWith("file:") ||
    MODULE_EXTENSIONS.some((ext) => spec.endsWith(ext))
  );
}

/** Is this the spec of a TypeScript policy module (which runs only under a TypeScript loader)? */
export function isTypeScriptPolicyModule(spec: string): boolean {
  return isPolicyModuleSpec(spec) && TYPESCRIPT_EXTENSIONS.some((ext) => spec.endsWith(ext));
}

/** The file a module spec names: a file: URL's path, else the path resolved against the working directory. */
export function policyModulePath(spec: string): string {
  if (!spec.startsWith("file:")) return resolve(process.cwd(), spec);
  try {
    return fileURLToPath(new URL(spec));
  } catch (error) {
    throw new Error(`policy module ${spec}: not a file URL (${(error as Error).message})`);
  }
}

/**
 * A policy's label made safe as part of a file name (the simulator's --record logs): a module spec's path
 * separators and other odd characters become "_"; a built-in name is its own label.
 */
export function policyFileLabel(spec: string): string {
  if (!isPolicyModuleSpec(spec)) return spec;
  const label = spec
    .replace(/^file:\/*/, "")
    .replace(/[^A-Za-z0-9._:+-]+/g, "_")
    .replace(/^[._]+/, "");
  return label === "" ? "module" : label;
}

interface LoadedModule {
  readonly path: string;
  readonly create: () => SchedulingPolicy;
}

/** Modules loaded, by spec as given. */
const loaded = new Map<string, LoadedModule>();
/** Loads under way, so concurrent callers share one import and one verdict. */
const loading = new Map<string, Promise<void>>();

/**
 * Imports and checks the policy modules among `specs` (other specs are skipped: built-in names), once per
 * spec. Throws the first problem, naming the file: not found, not importable, no factory export, a factory
 * that throws or returns something that is no policy, or the same object twice.
 */
export async function loadPolicyModules(specs: Iterable<string>): Promise<void> {
  for (const spec of new Set(specs)) {
    if (!isPolicyModuleSpec(spec) || loaded.has(spec)) continue;
    let load = loading.get(spec);
    if (!load) {
      load = loadPolicyModule(spec).finally(() => loading.delete(spec));
      loading.set(spec, load);
    }
    await load;
  }
}

/** The fresh-policy factory of a loaded module spec, or undefined (not a module spec, or not loaded). */
export function policyModuleFactory(spec: string): (() => SchedulingPolicy) | undefined {
  return loaded.get(spec)?.create;
}

/** The module specs loaded so far, in load order. */
export function loadedPolicyModules(): string[] {
  return [...loaded.keys()];
}

async function loadPolicyModule(spec: string): Promise<void> {
  const path = policyModulePath(spec);
  const where = spec === path ? `policy module ${spec}` : `policy module ${spec} (${path})`;
  const fail = (problem: string) => new Error(`${where}: ${problem}`);
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch {
    throw fail("file not found");
  }
  if (!isFile) throw fail("not a file");
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    throw fail(importProblem(path, error));
  }
  // the default export, or the named createPolicy (whichever is a function, when both are there)
  const exported = (["default", "createPolicy"] as const)
    .map((key) => ({ key, value: exports[key] }))
    .filter((e) => e.value !== undefined);
  const chosen = exported.find((e) => typeof e.value === "function") ?? exported[0];
  if (chosen === undefined) {
    throw fail(
      "exports no policy factory: export a zero-argument function returning a fresh policy as its default " +
        "export (`export default function () { return { ... } }`) or as `export function createPolicy()`",
    );
  }
  const factory = chosen.value;
  if (typeof factory !== "function") {
    const looksLikePolicy = typeof factory === "object" && factory !== null && "prioritize" in factory;
    throw fail(
      `its ${chosen.key === "default" ? "default export" : "createPolicy export"} is ${describeValue(factory)}, ` +
        "not a function: export a zero-argument factory returning a fresh policy" +
        (looksLikePolicy
          ? " (not the policy object itself: policies keep per-run state, so each run needs its own)"
          : ""),
    );
  }
  const create = checkedFactory(factory as () => unknown, (problem) => fail(problem));
  // Two calls: a factory must hand each run a policy of its own.
  create();
  create();
  loaded.set(spec, { path, create });
}

/** Why a module could not be imported; for TypeScript that node cannot run, how to run it. */
export function importProblem(path: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (TYPESCRIPT_EXTENSIONS.includes(extname(path)) && code === "ERR_UNKNOWN_FILE_EXTENSION") {
    return (
      "a TypeScript module, which node does not run as is: compile it to JavaScript first (e.g. `npx tsc " +
      "--module nodenext --target es2022 <file>`, then pass the .js), or run the CLI with a TypeScript " +
      "loader: `node --import tsx bin/continuum.js ...`"
    );
  }
  return `could not be imported: ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * The factory wrapped so every policy it returns is checked: it must not throw, must return a policy
 * (policyProblems finds nothing), and never an object it returned before.
 */
function checkedFactory(factory: () => unknown, fail: (problem: string) => Error): () => SchedulingPolicy {
  const returned = new WeakSet<object>();
  return () => {
    let policy: unknown;
    try {
      policy = factory();
    } catch (error) {
      throw fail(`its factory threw: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (policy instanceof Promise || (isObject(policy) && typeof policy["then"] === "function")) {
      throw fail("its factory returned a promise: the factory must return the policy itself, synchronously");
    }
    const problems = policyProblems(policy);
    if (problems.length > 0) throw fail(`its factory returned no valid policy: ${problems.join("; ")}`);
    const object = policy as object;
    if (returned.has(object)) {
      throw fail(
        "its factory returned the same object twice: return a fresh policy on every call (policies keep per-run state)",
      );
    }
    returned.add(object);
    return policy as SchedulingPolicy;
  };
}

type MemberCheck = readonly [name: string, required: boolean, check: (value: unknown) => string | null];

const isString = (value: unknown) => (typeof value === "string" ? null : "a string");
const isBoolean = (value: unknown) => (typeof value === "boolean" ? null : "a boolean");
const isFunction = (value: unknown) => (typeof value === "function" ? null : "a function");
const oneOf =
  (...choices: string[]) =>
  (value: unknown) =>
    choices.includes(value as string) ? null : choices.map((c) => `"${c}"`).join(" or ");

/** The members of SchedulingPolicy (src/core/policy.ts) and what each must be. */
const MEMBERS: readonly MemberCheck[] = [
  ["name", true, (value) => (typeof value === "string" && value !== "" ? null : "a non-empty string")],
  ["description", true, isString],
  ["needsOffload", true, isBoolean],
  ["toolParser", true, oneOf("paper", "fork")],
  ["dynamicPriorities", true, isBoolean],
  ["prioritize", true, isFunction],
  ["retain", true, isFunction],
  ["pinVictimRank", true, isFunction],
  ["nextPriorityChangeS", false, isFunction],
  ["pinSacrifice", false, oneOf("any", "ranked-after")],
  ["admitsWholePrompts", false, isBoolean],
  ["admitsNewProgram", false, isFunction],
  ["admitsTurn", false, isFunction],
  ["onProgramEnded", false, isFunction],
  ["preemptsForAdmission", false, isFunction],
];

/**
 * What makes `value` no SchedulingPolicy: each required member missing or of the wrong type, each optional
 * member present with the wrong type. Empty for a valid policy (members may come from a class's prototype).
 */
export function policyProblems(value: unknown): string[] {
  if (!isObject(value)) return [`expected an object, got ${describeValue(value)}`];
  const problems: string[] = [];
  for (const [name, required, check] of MEMBERS) {
    const member = value[name];
    if (member === undefined) {
      if (required) problems.push(`${name} is missing`);
      continue;
    }
    const expected = check(member);
    if (expected !== null) problems.push(`${name} must be ${expected}, got ${describeValue(member)}`);
  }
  return problems;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    case "undefined":
      return "undefined";
    case "function":
      return "a function";
    case "symbol":
      return "a symbol";
    default:
      return "an object";
  }
}
