import assert from "node:assert/strict";
import { test } from "node:test";
import { classifyProbeFailure, PROBE_MARK, type ProbeExit } from "./probe-failure.js";

const plugin = "/opt/gpu/libggml-cuda.so";
const ended = (over: Partial<ProbeExit>): ProbeExit => ({
  code: null,
  signal: null,
  stderr: "",
  timedOutS: null,
  ...over,
});
const stages = (...names: string[]) => names.map((n) => `${PROBE_MARK} stage ${n}`).join("\n");

test("an abort inside CUDA names the stage and CUDA's own error (gpu.md's H100 failure)", () => {
  const stderr = [
    stages("loading the plugin", "loading the model", "creating a context", "decoding"),
    "CUDA error: the provided PTX was compiled with an unsupported toolchain",
    "  current device: 0, in function ggml_cuda_kernel_can_use_pdl at ggml-cuda.cu:108",
    "ggml-cuda.cu:108: CUDA error",
  ].join("\n");
  assert.deepEqual(classifyProbeFailure(ended({ signal: "SIGABRT", stderr }), plugin), {
    kind: "crash",
    cause: "aborted while decoding (CUDA error: the provided PTX was compiled with an unsupported toolchain)",
  });
});

test("a plugin that does not load says why, without repeating its path", () => {
  const stderr = [
    stages("loading the plugin"),
    `load_backend: failed to load ${plugin}: libcudart.so.13: cannot open shared object file: No such file or directory`,
    `${PROBE_MARK} error: the plugin did not load`,
  ].join("\n");
  assert.deepEqual(classifyProbeFailure(ended({ code: 1, stderr }), plugin), {
    kind: "plugin-load",
    cause:
      "the plugin did not load (libcudart.so.13: cannot open shared object file: No such file or directory)",
  });
  const vulkan = `load_backend: failed to initialize backend from ${plugin}: ggml_backend_init returned NULL`;
  assert.equal(
    classifyProbeFailure(ended({ code: 1, stderr: vulkan }), plugin).cause,
    "the plugin did not load (ggml_backend_init returned NULL)",
  );
});

test("running out of GPU memory is told apart from other crashes", () => {
  const stderr = [
    stages("loading the plugin", "loading the model"),
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 15000.00 MiB on device 0: cudaMalloc failed: out of memory",
  ].join("\n");
  const failure = classifyProbeFailure(ended({ code: 1, stderr }), plugin);
  assert.equal(failure.kind, "out-of-memory");
  assert.match(
    failure.cause,
    /^out of GPU memory while loading the model \(.*cudaMalloc failed: out of memory\)$/,
  );
});

test("no GPU device, a segfault, a timeout and a plain error exit each get their own words", () => {
  const noDevice = `${stages("loading the plugin")}\n${PROBE_MARK} error: no GPU device: the plugin loaded but found none`;
  assert.deepEqual(classifyProbeFailure(ended({ code: 1, stderr: noDevice }), plugin), {
    kind: "no-device",
    cause: "no GPU device: the plugin loaded but found none",
  });
  assert.equal(
    classifyProbeFailure(ended({ signal: "SIGSEGV", stderr: stages("loading the model") }), plugin).cause,
    "crashed (segmentation fault) while loading the model",
  );
  assert.deepEqual(
    classifyProbeFailure(
      ended({ signal: "SIGKILL", stderr: stages("loading the model"), timedOutS: 300 }),
      plugin,
    ),
    { kind: "timeout", cause: "no answer within 300 s while loading the model" },
  );
  const error = `${stages("loading the model")}\n${PROBE_MARK} error: failed to load model from /m.gguf`;
  assert.deepEqual(classifyProbeFailure(ended({ code: 1, stderr: error }), plugin), {
    kind: "error",
    cause: "exited with code 1 while loading the model (failed to load model from /m.gguf)",
  });
});
