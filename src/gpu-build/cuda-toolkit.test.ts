import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { driverCudaVersion, nvccReleaseLine, toolkitNewerThanDriver } from "./cuda-toolkit.js";

const nvccVersion = `nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
`;
const smiBanner =
  "| NVIDIA-SMI 580.159                 Driver Version: 580.159        CUDA Version: 13.0     |";

describe("CUDA versions", () => {
  it("reads nvcc's release line and the driver's CUDA version", () => {
    assert.equal(nvccReleaseLine(nvccVersion), "Cuda compilation tools, release 13.0, V13.0.88");
    assert.equal(nvccReleaseLine("command not found"), undefined);
    assert.equal(driverCudaVersion(smiBanner), "13.0");
  });

  it("flags a toolkit newer than the driver (the packaged plugin's failure), not an equal or older one", () => {
    const release = "Cuda compilation tools, release 13.0, V13.0.88";
    assert.equal(toolkitNewerThanDriver(release, "12.8"), true);
    assert.equal(toolkitNewerThanDriver("Cuda compilation tools, release 12.10, V12.10.1", "12.9"), true);
    assert.equal(toolkitNewerThanDriver(release, "13.0"), false);
    assert.equal(toolkitNewerThanDriver(release, "13.1"), false);
  });
});
