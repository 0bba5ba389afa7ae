import assert from "node:assert/strict";
import { test } from "node:test";
import { formatTextTable } from "./text-table.js";

test("columns are as wide as their widest cell; labels left, numbers right", () => {
  const text = formatTextTable(
    ["policy", "jct"],
    [
      ["vllm", "12.5"],
      ["cachettl", "3.0"],
    ],
  );
  assert.equal(text, ["policy     jct", "vllm      12.5", "cachettl   3.0"].join("\n"));
  assert.equal(formatTextTable(["n", "x"], [["10", "1"]], { labelColumn: false }), " n  x\n10  1");
});
