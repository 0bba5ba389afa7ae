import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import { createPolicy, isPolicySpec } from "./index.js";
import {
  importProblem,
  isPolicyModuleSpec,
  loadPolicyModules,
  policyFileLabel,
  policyProblems,
} from "./policy-modules.js";

const dir = mkdtempSync(join(tmpdir(), "continuum-policy-modules-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A valid policy's source, as an object literal. */
const POLICY = `{
  name: "mine",
  description: "request FCFS, no retention",
  needsOffload: false,
  toolParser: "paper",
  dynamicPriorities: false,
  prioritize(request) { request.priority[2] = request.arrivalS; },
  retain() { return { kind: "free" }; },
  pinVictimRank(program) { return program.arrivalOrder; },
}`;

let files = 0;
/** Writes a module and returns its absolute path. */
function moduleFile(source: string, ext = ".mjs"): string {
  const path = join(dir, `m${files++}${ext}`);
  writeFileSync(path, source);
  return path;
}

/** A module's policy with `change` spread over it (`undefined` deletes a member). */
function policyWith(change: string): string {
  return moduleFile(`export default function () {
    const policy = { ...${POLICY}, ${change} };
    for (const key of Object.keys(policy)) if (policy[key] === undefined) delete policy[key];
    return policy;
  }`);
}

async function loadError(spec: string): Promise<string> {
  try {
    await loadPolicyModules([spec]);
  } catch (error) {
    return (error as Error).message;
  }
  assert.fail(`${spec} loaded`);
}

describe("policy modules: specs", () => {
  it("paths, file: URLs and script file names are module specs; built-in names are not", () => {
    for (const spec of ["./p.mjs", "../p.js", "/abs/p", "file:///abs/p.mjs", "p.js", "p.mjs", "p.ts"]) {
      assert.ok(isPolicyModuleSpec(spec), spec);
      assert.ok(isPolicySpec(spec), spec);
    }
    for (const name of ["vllm", "cachettl-adaptive:no-pins", "thunderagent:dynamo", "lifo"]) {
      assert.equal(isPolicyModuleSpec(name), false, name);
    }
    assert.equal(isPolicySpec("lifo"), false);
  });

  it("a module spec's file label has no path separators; a built-in name is its own", () => {
    assert.equal(policyFileLabel("./examples/policies/tool-pin.mjs"), "examples_policies_tool-pin.mjs");
    assert.equal(policyFileLabel("/tmp/x/p.mjs"), "tmp_x_p.mjs");
    assert.equal(policyFileLabel("file:///tmp/p.mjs"), "tmp_p.mjs");
    assert.equal(policyFileLabel("thunderagent:dynamo"), "thunderagent:dynamo");
  });
});

describe("policy modules: loading", () => {
  it("a default export: createPolicy(spec) gives a fresh policy each call, after loading", async () => {
    const path = moduleFile(`export default () => (${POLICY});`);
    const spec = `./${relative(process.cwd(), path)}`;
    assert.throws(() => createPolicy(spec), /is not loaded: await loadPolicyModules/);
    await loadPolicyModules([spec, "vllm"]);
    const a = createPolicy(spec);
    const b = createPolicy(spec);
    assert.equal(a.name, "mine");
    assert.notEqual(a, b);
    assert.deepEqual(policyProblems(a), []);
  });

  it("a named createPolicy export, given by absolute path or file: URL", async () => {
    const path = moduleFile(`export function createPolicy() { return ${POLICY}; }`);
    const url = pathToFileURL(path).href;
    await loadPolicyModules([path, url]);
    assert.equal(createPolicy(path).name, "mine");
    assert.equal(createPolicy(url).name, "mine");
  });

  it("a class instance (members on the prototype) and the optional members are accepted", async () => {
    const path = moduleFile(`class Mine {
      name = "class"; description = "d"; needsOffload = false; toolParser = "fork"; dynamicPriorities = true;
      pinSacrifice = "ranked-after"; admitsWholePrompts = true;
      prioritize() {} retain() { return { kind: "free" }; } pinVictimRank() { return 0; }
      nextPriorityChangeS() { return Infinity; } admitsTurn() { return true; }
    }
    export default () => new Mine();`);
    await loadPolicyModules([path]);
    assert.equal(createPolicy(path).toolParser, "fork");
  });

  it("names the file and the problem: not found, not a file, not importable", async () => {
    const missing = join(dir, "missing.mjs");
    assert.equal(await loadError(missing), `policy module ${missing}: file not found`);
    const relativeMissing = "./no/such/policy.mjs";
    assert.match(
      await loadError(relativeMissing),
      new RegExp(
        `^policy module \\./no/such/policy\\.mjs \\(${process.cwd()}/no/such/policy\\.mjs\\): file not found$`,
      ),
    );
    const folder = join(dir, "folder.mjs");
    mkdirSync(folder);
    assert.equal(await loadError(folder), `policy module ${folder}: not a file`);
    const broken = moduleFile("export default () => {");
    assert.match(await loadError(broken), /^policy module .*: could not be imported: .*Unexpected/);
  });

  it("a module without a factory, or whose factory is no function", async () => {
    assert.match(
      await loadError(moduleFile("export const policy = 1;")),
      /exports no policy factory: export a zero-argument function .* default export .* createPolicy/,
    );
    assert.match(
      await loadError(moduleFile(`export default ${POLICY};`)),
      /its default export is an object, not a function: .* \(not the policy object itself: policies keep per-run state/,
    );
    assert.match(
      await loadError(moduleFile(`export const createPolicy = "vllm";`)),
      /its createPolicy export is "vllm", not a function/,
    );
  });

  it("a factory that throws, returns a promise, or returns the same object twice", async () => {
    assert.match(
      await loadError(moduleFile(`export default () => { throw new Error("no config"); };`)),
      /: its factory threw: no config$/,
    );
    assert.match(
      await loadError(moduleFile(`export default async () => (${POLICY});`)),
      /its factory returned a promise: the factory must return the policy itself, synchronously/,
    );
    assert.match(
      await loadError(moduleFile(`const policy = ${POLICY};\nexport default () => policy;`)),
      /its factory returned the same object twice: return a fresh policy on every call/,
    );
  });

  it("a policy missing a required member or with one of the wrong type, each named", async () => {
    const cases: [string, RegExp][] = [
      ["prioritize: undefined", /its factory returned no valid policy: prioritize is missing$/],
      ["name: 7", /name must be a non-empty string, got 7/],
      ["description: undefined", /description is missing/],
      ['needsOffload: "no"', /needsOffload must be a boolean, got "no"/],
      ["dynamicPriorities: 0", /dynamicPriorities must be a boolean, got 0/],
      ['toolParser: "json"', /toolParser must be "paper" or "fork", got "json"/],
      ["retain: { kind: 'free' }", /retain must be a function, got an object/],
      ["pinVictimRank: 1", /pinVictimRank must be a function, got 1/],
      ['pinSacrifice: "never"', /pinSacrifice must be "any" or "ranked-after", got "never"/],
      ['admitsWholePrompts: "yes"', /admitsWholePrompts must be a boolean, got "yes"/],
      ["admitsTurn: true", /admitsTurn must be a function, got true/],
      ["admitsNewProgram: 1", /admitsNewProgram must be a function/],
      ["nextPriorityChangeS: 0", /nextPriorityChangeS must be a function/],
      ["onProgramEnded: null", /onProgramEnded must be a function, got null/],
      ["preemptsForAdmission: []", /preemptsForAdmission must be a function, got an array/],
    ];
    for (const [change, expected] of cases) {
      const path = policyWith(change);
      const message = await loadError(path);
      assert.ok(message.startsWith(`policy module ${path}: `), message);
      assert.match(message, expected, change);
    }
    // every problem at once
    assert.match(
      await loadError(policyWith("name: undefined, retain: undefined")),
      /name is missing; retain is missing$/,
    );
    assert.match(await loadError(moduleFile("export default () => 42;")), /expected an object, got 42/);
  });

  it("a TypeScript module node cannot run is answered with how to run it", () => {
    const error = Object.assign(new TypeError('Unknown file extension ".ts"'), {
      code: "ERR_UNKNOWN_FILE_EXTENSION",
    });
    const message = importProblem("/p/policy.ts", error);
    assert.match(message, /a TypeScript module, which node does not run as is: compile it to JavaScript/);
    assert.match(message, /node --import tsx bin\/continuum\.js/);
    assert.match(importProblem("/p/policy.mjs", error), /^could not be imported: Unknown file extension/);
  });

  it("a TypeScript module loads where a TypeScript loader runs (this test runs under tsx)", async () => {
    const path = moduleFile(
      `const parser: "paper" = "paper";\nexport default () => ({ ...${POLICY}, toolParser: parser });`,
      ".ts",
    );
    await loadPolicyModules([path]);
    assert.equal(createPolicy(path).name, "mine");
  });

  it("every built-in policy passes the module check", () => {
    for (const name of ["vllm", "cachettl-adaptive", "autellix", "thunderagent", "concur", "infercept"]) {
      assert.deepEqual(policyProblems(createPolicy(name)), [], name);
    }
  });
});
