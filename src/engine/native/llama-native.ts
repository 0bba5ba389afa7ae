/**
 * Typed wrapper over Continuum's own N-API addon for llama.cpp (src/engine/native/addon/*.cpp, built by
 * scripts/build-native.mjs into .cache/native/continuum_llama.node), one import for its users:
 * - llama-types.ts: options, infos, decode results and error codes;
 * - native-addon.ts: the addon's raw shapes, where it is found and loaded, and what it offers
 *   process-wide (versions, log level, backends, devices, page-locked host buffers);
 * - llama-model.ts: a loaded model and its contexts (one unified KV pool each, decoding, KV and state ops);
 * - decode-batch.ts: the reusable batch a context decodes.
 */
export { DecodeBatch } from "./decode-batch.js";
export { createContext, LlamaContext, LlamaModel, loadModel, weightPlacement } from "./llama-model.js";
export {
  type BackendsInfo,
  type ChatMessage,
  type ContextInfo,
  type ContextOptions,
  type CopyRates,
  type DecodeOptions,
  type DecodeOutput,
  type DecodePhases,
  type DecodeResult,
  type DeviceInfo,
  type HostCopyBandwidth,
  isLlamaError,
  type KvCacheType,
  type LlamaErrorCode,
  type LoadBackendsOptions,
  type LoadModelOptions,
  type LogLevel,
  type ModelInfo,
  type SamplerParams,
  type SeqStateFile,
  type VersionInfo,
} from "./llama-types.js";
export {
  allocPinnedBuffer,
  backendsIfLoaded,
  devices,
  findProjectRoot,
  isNativeAvailable,
  loadBackends,
  loadedBackends,
  measureHostCopyBandwidth,
  nativeAddonPath,
  type RowSamplerImpl,
  type RowSamplerParams,
  sampleLogits,
  setLogLevel,
  systemInfo,
  versionInfo,
} from "./native-addon.js";
