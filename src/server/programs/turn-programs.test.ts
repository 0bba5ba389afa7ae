import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { TurnPrograms } from "./turn-programs.js";

const toolLess = { priorTurns: 0, offersTools: false, messages: [] };
const withTools = { priorTurns: 0, offersTools: true, messages: [] };

function turnPrograms(maxPrograms = 8) {
  const marked: [string, string][] = [];
  const turns = new TurnPrograms(maxPrograms, (programId, requestId) => marked.push([programId, requestId]));
  /** one chat request arriving and queued */
  const send = (requestId: string, programId: string, chat = toolLess, isLastStep = false) => {
    const program = turns.programOf(null, programId, null, isLastStep, chat);
    turns.queued(program, requestId, isLastStep, chat);
    return program.programId;
  };
  return { turns, marked, send };
}

describe("TurnPrograms", () => {
  test("tool-less requests of a program seen with tools are one-offs; before that, a turn with tools marks them side requests", () => {
    const { marked, send } = turnPrograms();
    assert.equal(send("title", "s"), "s", "no tools seen yet: a turn");
    assert.equal(send("turn-1", "s", withTools), "s");
    assert.deepEqual(marked, [["s", "title"]]);
    assert.equal(send("title-2", "s"), null, "now a one-off");
    assert.equal(send("end", "s", toolLess, true), "s", "a last step stays a turn");
    assert.equal(send("turn-2", "s", withTools), "s");
    assert.deepEqual(marked, [["s", "title"]]);
  });

  test("a tool-less request queued after its program's turn with tools arrived is marked at once", () => {
    const { turns, marked } = turnPrograms();
    const title = turns.programOf(null, "s", null, false, toolLess); // still tokenizing
    turns.programOf(null, "s", null, false, withTools);
    turns.queued(title, "title", false, toolLess);
    assert.deepEqual(marked, [["s", "title"]]);
  });

  test("remembers the latest 4 tool-less requests of at most maxPrograms programs", () => {
    const { marked, send } = turnPrograms(2);
    for (const id of ["a1", "a2", "a3", "a4", "a5"]) send(id, "a");
    send("b1", "b");
    send("c1", "c"); // a, the least recently used, is forgotten
    send("t", "a", withTools);
    send("t", "b", withTools);
    assert.deepEqual(marked, [["b", "b1"]]);
    const { marked: kept, send: sendKept } = turnPrograms(2);
    for (const id of ["a1", "a2", "a3", "a4", "a5"]) sendKept(id, "a");
    sendKept("t", "a", withTools);
    assert.deepEqual(
      kept.map(([, id]) => id),
      ["a2", "a3", "a4", "a5"],
    );
  });

  test("an id-less conversation that repeats a remembered reply is a turn of that reply's program, else of a new one", () => {
    const { turns } = turnPrograms();
    const asked = [{ role: "user" as const, content: "Fix the test." }];
    const first = turns.programOf("tenant-a", null, null, false, { ...toolLess, messages: asked });
    assert.equal(first.implicit, true);
    assert.match(first.programId ?? "", /^tenant-a\/implicit-[0-9a-f]{16}$/);
    const program = first.programId as string;
    turns.answered(first as { programId: string; cacheSalt: string }, asked, false, {
      content: "I will run it.",
      calls: [],
    });
    const next = [
      ...asked,
      { role: "assistant" as const, content: "I will run it." },
      { role: "user" as const, content: "Go on." },
    ];
    assert.equal(
      turns.programOf("tenant-a", null, null, false, { ...toolLess, messages: next }).programId,
      program,
    );
    // another reply to the same conversation, or another tenant's same conversation, is another program
    const other = [
      ...asked,
      { role: "assistant" as const, content: "No." },
      { role: "user" as const, content: "Go on." },
    ];
    assert.notEqual(
      turns.programOf("tenant-a", null, null, false, { ...toolLess, messages: other }).programId,
      program,
    );
    assert.notEqual(
      turns.programOf("tenant-b", null, null, false, { ...toolLess, messages: next }).programId,
      program,
    );
    // its last step ends it: a conversation repeating its replies starts a program of its own
    turns.answered(first as { programId: string; cacheSalt: string }, next, true, {
      content: "Done.",
      calls: [],
    });
    assert.notEqual(
      turns.programOf("tenant-a", null, null, false, { ...toolLess, messages: next }).programId,
      program,
    );
  });
});
