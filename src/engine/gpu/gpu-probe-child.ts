/**
 * The child process of probeGpuBackend: loads the backends with the plugin under test, the model with the
 * requested GPU layers, decodes a few tokens, and prints where the model ran (DeviceInfo) as one JSON line.
 * argv[2] is the GpuProbeRequest as JSON. Stage lines on stderr tell the parent how far it got if it dies.
 */

import { DecodeBatch, devices, loadBackends, loadModel } from "../native/llama-native.js";
import type { GpuProbeRequest } from "./backend-probe.js";
import { type DeviceInfo, deviceInfoOf } from "./device-info.js";
import { PROBE_MARK } from "./probe-failure.js";

const GENERATED_TOKENS = 3;

function stage(what: string): void {
  process.stderr.write(`${PROBE_MARK} stage ${what}\n`);
}

async function probe(request: GpuProbeRequest): Promise<DeviceInfo> {
  stage("loading the plugin");
  const backends = loadBackends({ gpuPlugins: request.plugin === null ? [] : [request.plugin] });
  if (backends.failed.length > 0) throw new Error("the plugin did not load");
  if (request.plugin !== null && !backends.devices.some((d) => d.type === "gpu" || d.type === "igpu")) {
    throw new Error("no GPU device: the plugin loaded but found none");
  }

  stage("loading the model");
  const model = await loadModel(request.modelPath, { gpuLayers: request.gpuLayers });
  stage("creating a context");
  const context = await model.createContext({
    nCtx: 256,
    nSeqMax: 1,
    nBatch: 64,
    ...(request.flashAttn === undefined ? {} : { flashAttn: request.flashAttn }),
    ...(request.kvCacheType ? { typeK: request.kvCacheType, typeV: request.kvCacheType } : {}),
  });

  stage("decoding");
  context.setSampler(0, null);
  const batch = new DecodeBatch(64);
  const prompt = model.tokenize("The GPU backend check", { addSpecial: true });
  let next = (await context.decode(batch.addSequence(prompt, 0, 0))).outputs[0]!.token;
  for (let i = 0; i < GENERATED_TOKENS; i++) {
    const step = await context.decode(batch.clear().addSequence([next], prompt.length + i, 0));
    next = step.outputs[0]!.token;
  }

  const device = deviceInfoOf(devices(), model.info.nLayer, model.gpuLayers);
  context.free();
  model.free();
  return device;
}

try {
  const device = await probe(JSON.parse(process.argv[2] ?? "") as GpuProbeRequest);
  process.stdout.write(`${JSON.stringify(device)}\n`);
} catch (error) {
  process.stderr.write(`${PROBE_MARK} error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
