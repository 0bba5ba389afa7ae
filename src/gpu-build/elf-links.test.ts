import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseReadelfDynamic, pluginLinkProblem } from "./elf-links.js";

// `readelf -d` of libggml-cpu.so built standalone from the pinned tree, as a stand-in plugin.
const withGgmlDefaults = `
Dynamic section at offset 0x10ba88 contains 31 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libggml-base.so.0]
 0x0000000000000001 (NEEDED)             Shared library: [libgomp.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libstdc++.so.6]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x000000000000001d (RUNPATH)            Library runpath: [/tmp/sotest/base/src:]
`;
const withOurFlags = `
 0x0000000000000001 (NEEDED)             Shared library: [libggml-base.so]
 0x0000000000000001 (NEEDED)             Shared library: [libgomp.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x000000000000001d (RUNPATH)            Library runpath: [$ORIGIN/../src:/usr/local/cuda/lib64]
`;

describe("parseReadelfDynamic", () => {
  it("reads NEEDED and RUNPATH", () => {
    assert.deepEqual(parseReadelfDynamic(withOurFlags), {
      needed: ["libggml-base.so", "libgomp.so.1", "libc.so.6"],
      runpath: ["$ORIGIN/../src", "/usr/local/cuda/lib64"],
    });
  });
});

describe("pluginLinkProblem", () => {
  it("accepts a plugin that binds to libggml-base.so and searches no build tree", () => {
    assert.equal(pluginLinkProblem("libggml-cuda.so", parseReadelfDynamic(withOurFlags), "/b"), undefined);
  });

  it("refuses ggml's versioned libggml-base.so.0, which would load a second ggml-base", () => {
    const links = { needed: ["libggml-base.so.0", "libc.so.6"], runpath: [] };
    assert.match(pluginLinkProblem("libggml-cuda.so", links, "/b") ?? "", /libggml-base\.so\.0/);
  });

  it("refuses a RUNPATH into the build tree", () => {
    const problem = pluginLinkProblem(
      "libggml-cpu.so",
      parseReadelfDynamic(withGgmlDefaults),
      "/tmp/sotest/base",
    );
    assert.match(problem ?? "", /libggml-base\.so\.0/);
    const links = { needed: ["libggml-base.so"], runpath: ["/tmp/sotest/base/src"] };
    assert.match(
      pluginLinkProblem("libggml-cpu.so", links, "/tmp/sotest/base") ?? "",
      /RUNPATH .* build tree/,
    );
    assert.equal(
      pluginLinkProblem(
        "x.so",
        { needed: ["libggml-base.so"], runpath: ["/tmp/sotest/b2"] },
        "/tmp/sotest/b",
      ),
      undefined,
    );
  });
});
