/** The tool a finished turn called, read by the engine and told to the scheduler (which never reads text). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { SchedulingPolicy } from "../../core/policy.js";
import { fixedTtlPolicy, request, run } from "../test-support/engine-helpers.js";
import { createFakeEngine } from "../test-support/fake-model-runner.js";
import { turnToolReader } from "./turn-tool.js";

const bash = "Let me run the tests.\n```bash\ncd /x && pytest\n```\n";
const minimaxCall = '<minimax:tool_call>\n<invoke name="read_file">\n</invoke>\n</minimax:tool_call>';
const hermes = '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>';
const minimax = (output: string) => /invoke name="([^"]+)"/.exec(output)?.[1] ?? null;

describe("turnToolReader", () => {
  test("the fork's parser reads the bash block's first word, the paper's the command run", () => {
    assert.equal(turnToolReader("fork", { toolHint: null })?.(bash), "cd");
    assert.equal(turnToolReader("paper", { toolHint: null })?.(bash), "pytest");
  });

  test("the request's namer (its model's call format) first, else the general parser; a hint needs no reading", () => {
    const read = turnToolReader("paper", { toolHint: null, toolNamer: minimax });
    assert.equal(read?.(minimaxCall), "read_file");
    assert.equal(read?.(hermes), "bash", "the namer found none");
    assert.equal(turnToolReader("paper", { toolHint: null })?.(minimaxCall), null);
    assert.equal(turnToolReader("paper", { toolHint: "grep", toolNamer: minimax }), null);
  });
});

test("the engine tells the scheduler the tool its request's namer read from the finished output; a hint wins", async () => {
  const tools: string[] = [];
  const base = fixedTtlPolicy(60);
  const policy: SchedulingPolicy = {
    ...base,
    retain: (r, program, tool, ctx) => {
      tools.push(tool);
      return base.retain(r, program, tool, ctx);
    },
  };
  const engine = createFakeEngine({ policy });
  try {
    const outputs: string[] = [];
    const namer = (output: string) => {
      outputs.push(output);
      return "from-namer";
    };
    const named = await run(engine, request("a", "a turn", { programId: "p", toolNamer: namer }));
    await run(engine, request("b", "a turn", { programId: "q", toolNamer: namer, toolHint: "ls" }));
    assert.deepEqual(tools, ["from-namer", "ls"]);
    assert.deepEqual(outputs, [named.deltas], "the namer read the whole output, once");
  } finally {
    await engine.shutdown();
  }
});
