import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SubagentLinks } from "./subagent-links.js";

describe("SubagentLinks", () => {
  it("keeps each program's first parent, lists children, and forgets both ways", () => {
    const links = new SubagentLinks();
    links.link("a", "root");
    links.link("b", "root");
    links.link("a", "other");
    links.link("root", "root");
    assert.deepEqual([...links.children("root")], ["a", "b"]);
    assert.equal(links.parent("a"), "root", "a program has one parent: the first word holds");
    assert.equal(links.parent("root"), null, "never its own parent");
    links.link("g", "a");
    links.forget("a");
    assert.deepEqual([...links.children("root")], ["b"]);
    assert.equal(links.parent("g"), null, "a forgotten parent's children lose the link");
    links.forget("b");
    assert.deepEqual([...links.children("root")], []);
    assert.equal(links.size, 0);
  });
});
