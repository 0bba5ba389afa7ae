import assert from "node:assert/strict";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { isOpencodeExport } from "./import-opencode.js";
import { parseTraceJsonl, serializeTraceJsonl, type TraceTurn } from "./trace.js";
import { findTrajectoryFiles, importFoundTrajectory } from "./trajectory-files.js";

const EXPORT = fileURLToPath(new URL("./test-support/opencode-export.json", import.meta.url));
const turn = (input: number, cached: number, output: number, tool: string | null, toolS: number | null) =>
  ({ input, cached, output, tool, toolS }) satisfies TraceTurn;

describe("opencode export import (`opencode export <session-id>`)", () => {
  it("makes one turn per step of an assistant message, with its tokens and tool times", async () => {
    const result = await importFoundTrajectory({ path: EXPORT, named: true });
    assert.ok(result !== null);
    assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(result.programs)), result.programs);
    // the aborted last message's step has no tokens: left out
    assert.equal(result.responsesWithoutUsage, 1);
    assert.deepEqual(result.programs, [
      {
        id: "ses_0f1e2d3c4b5aTestSessionId",
        source: "opencode 9.9.9",
        turns: [
          // reasoning counts as output; parallel bash and read: the first names the tool, the next step's
          // request waits for the last to end (3.7 s) from when the first started running (1.3 s)
          turn(1000, 0, 60, "bash", 2.4),
          // the prompt is opencode's input and its cache read: 30 + 1060
          turn(1090, 1060, 20, "edit", 0.5),
          // no tool: the message ends (completed at 6.5 s) and the person writes the next one
          turn(1165, 1110, 15, "user", 23.6),
          turn(1240, 1180, 5, null, null),
        ],
      },
    ]);
  });

  it("is told from a mini-swe-agent trajectory, which also has messages", () => {
    const mini = { info: { exit_status: "Submitted" }, messages: [{ role: "user", content: "Fix it." }] };
    assert.equal(isOpencodeExport(mini), false);
    assert.equal(isOpencodeExport({ ...mini, info: { id: "ses_1" } }), false);
    assert.equal(isOpencodeExport({ info: { id: "ses_1" }, messages: [{ info: {}, parts: [] }] }), true);
  });

  it("is found in a directory beside other JSON", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-opencode-"));
    try {
      await copyFile(EXPORT, join(dir, "session.json"));
      await writeFile(join(dir, "preds.json"), JSON.stringify({ instance: { model_patch: "" } }));
      const files = await findTrajectoryFiles([dir]);
      const imported = await Promise.all(files.map((file) => importFoundTrajectory(file)));
      const programs = imported.flatMap((i) => i?.programs ?? []);
      assert.deepEqual(
        programs.map((p) => p.source),
        ["opencode 9.9.9"],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
