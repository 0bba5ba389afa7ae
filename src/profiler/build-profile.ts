/**
 * Turns the raw measurements of measure.ts into a `continuum-profile` v1 document (docs/profile-format.md,
 * src/core/profile/engine-profile-format.ts). Pure: no native code, unit-tested on synthetic numbers.
 *
 * Step-cost convention (what the simulator's EngineProfileLatencyModel assumes):
 * - every engine step pays the engine loop's own cost (`engineOverheadS`, measured with a real Engine) on
 *   top of the model's compute;
 * - `stepOverheadS` = the part of a step not proportional to its tokens: the intercept of decode compute vs
 *   batch at the smallest measured context (weights streamed once per step on a CPU) plus the engine loop's
 *   cost;
 * - decode points = median model compute per step + the engine loop's cost, i.e. the wall time of an engine
 *   step with that many decodes;
 * - prefill points = wall time of a whole prefill in nBatch chunks (model compute + one engine-loop cost per
 *   chunk). The quadratic is fitted to the points minus the fixed cost of every chunk after the first, so
 *   that the simulator's chunked sum (stepOverheadS + a((c+n)^2 - c^2) + b n per chunk) reproduces them,
 *   and its c stays close to stepOverheadS, as the format asks;
 * - prefill chunk points = wall time of an engine step prefilling n new tokens after c tokens of the same
 *   sequence (model compute + the engine loop's cost); the simulator prices chunks from them when present.
 */
import { readFileSync } from "node:fs";
import {
  ENGINE_PROFILE_FORMAT,
  ENGINE_PROFILE_VERSION,
  type EngineProfileJson,
  engineProfileSchema,
} from "../core/profile/engine-profile-format.js";
import { fitQuadratic } from "../core/profile/quadratic.js";
import type { DeviceInfo } from "../engine/gpu/device-info.js";
import type { HostCopyBandwidth } from "../engine/native/llama-native.js";
import type {
  DecodeSample,
  EngineOverheadSample,
  OffloadSample,
  PrefillChunkSample,
  PrefillSample,
} from "./measure.js";
import { median } from "./measure.js";

export interface ProfileMeasurements {
  readonly prefill: readonly PrefillSample[];
  /** single chunks after a context (absent in older measurement sets) */
  readonly prefillChunks?: readonly PrefillChunkSample[];
  readonly decode: readonly DecodeSample[];
  readonly offload: OffloadSample;
  readonly engineOverhead: EngineOverheadSample;
  /** the GPU's own copy bandwidth with host memory, at the offload state's size (null on the CPU) */
  readonly hostCopy?: HostCopyBandwidth | null;
}

export interface ProfileIdentity {
  readonly device: string;
  /** where the model and its KV cache ran */
  readonly deviceInfo: DeviceInfo;
  readonly model: string;
  readonly threads: number;
  readonly kvBytesPerToken: number;
  readonly kvCapacityTokens: number;
  /** rows per llama_decode, = the engine's max-num-batched-tokens */
  readonly nBatch: number;
}

/** The v1 document plus our own extra fields (ignored by loadEngineProfile). */
export type ContinuumProfileFile = EngineProfileJson & {
  readonly notes: {
    readonly generator: string;
    readonly createdAt: string;
    readonly nBatch: number;
    readonly engineOverheadS: number;
    readonly decodeInterceptS: number;
    readonly offload: {
      readonly tokens: number;
      readonly bytes: number;
      readonly saveRamBps: number;
      readonly restoreRamBps: number;
      readonly saveFileBps: number;
      readonly loadFileBps: number;
      /** whole-buffer copies of the same size between the GPU and host memory, beside the tier's saves and restores */
      readonly hostCopy?: HostCopyBandwidth;
    };
    readonly seconds: number;
    readonly text: string;
  };
};

/** Least-squares line y = slope x + intercept. */
export function fitLine(xs: readonly number[], ys: readonly number[]): { slope: number; intercept: number } {
  const n = xs.length;
  if (n === 0) return { slope: 0, intercept: 0 };
  const mx = xs.reduce((s, x) => s + x, 0) / n;
  const my = ys.reduce((s, y) => s + y, 0) / n;
  let sxx = 0;
  let sxy = 0;
  for (let i = 0; i < n; i++) {
    sxx += (xs[i]! - mx) ** 2;
    sxy += (xs[i]! - mx) * (ys[i]! - my);
  }
  const slope = sxx > 0 ? sxy / sxx : 0;
  return { slope, intercept: my - slope * mx };
}

/**
 * Fixed model cost of a step: intercept of decode compute vs batch at the smallest measured context,
 * clamped to [0, the cheapest measured step].
 */
export function decodeIntercept(decode: readonly DecodeSample[]): number {
  if (decode.length === 0) return 0;
  const minContext = Math.min(...decode.map((d) => d.contextTokens));
  const rows = decode.filter((d) => d.contextTokens === minContext);
  const ys = rows.map((d) => median(d.seconds));
  const cheapest = Math.min(...ys);
  if (rows.length < 2) return cheapest;
  const { intercept } = fitLine(
    rows.map((d) => d.batch),
    ys,
  );
  return Math.min(cheapest, Math.max(0, intercept));
}

export function buildProfile(
  id: ProfileIdentity,
  m: ProfileMeasurements,
  meta: { seconds: number; createdAt?: string },
): ContinuumProfileFile {
  if (m.prefill.length === 0) throw new Error("buildProfile: no prefill measurement");
  if (m.decode.length === 0) throw new Error("buildProfile: no decode measurement");
  const loopS = m.engineOverhead.perStepS;
  const interceptS = decodeIntercept(m.decode);
  const stepOverheadS = interceptS + loopS;

  const prefillPoints = m.prefill.map((p) => ({
    tokens: p.tokens,
    seconds: median(p.seconds) + p.chunks * loopS,
  }));
  const fitPoints = m.prefill.map((p, i) => ({
    x: p.tokens,
    y: prefillPoints[i]!.seconds - Math.max(0, p.chunks - 1) * stepOverheadS,
  }));
  const quadratic = fitQuadratic(fitPoints);

  const chunkPoints = (m.prefillChunks ?? []).map((c) => ({
    tokens: c.tokens,
    contextTokens: c.contextTokens,
    seconds: median(c.seconds) + loopS,
  }));

  const decodePoints = m.decode.map((d) => ({
    batch: d.batch,
    contextTokens: d.contextTokens,
    seconds: median(d.seconds) + loopS,
  }));

  const o = m.offload;
  const bps = (s: readonly number[]) => o.bytes / Math.max(1e-9, median(s));
  const restoreRamBps = bps(o.restoreRamS);
  const loadFileBps = bps(o.loadFileS);
  const profile: ContinuumProfileFile = {
    format: ENGINE_PROFILE_FORMAT,
    version: ENGINE_PROFILE_VERSION,
    device: id.device,
    model: id.model,
    threads: id.threads,
    kvBytesPerToken: id.kvBytesPerToken,
    kvCapacityTokens: id.kvCapacityTokens,
    prefill: { points: prefillPoints, quadratic, ...(chunkPoints.length > 0 ? { chunks: chunkPoints } : {}) },
    decode: { points: decodePoints },
    stepOverheadS,
    // reloads are what the cost model prices (PrefillReload): use the restore direction
    offload: { cpuBandwidthBps: restoreRamBps, diskBandwidthBps: loadFileBps },
    deviceInfo: id.deviceInfo,
    notes: {
      generator: "continuum profile",
      createdAt: meta.createdAt ?? new Date().toISOString(),
      nBatch: id.nBatch,
      engineOverheadS: loopS,
      decodeInterceptS: interceptS,
      offload: {
        tokens: o.tokens,
        bytes: o.bytes,
        saveRamBps: bps(o.saveRamS),
        restoreRamBps,
        saveFileBps: bps(o.saveFileS),
        loadFileBps,
        ...(m.hostCopy ? { hostCopy: m.hostCopy } : {}),
      },
      seconds: meta.seconds,
      text:
        "times: llama.cpp compute (decode + sampling) through LlamaModelRunner plus the engine loop's measured cost " +
        "per step; prefill in nBatch chunks from an empty pool, and single chunks after a context; decode with each sequence holding its own " +
        "cells; offload bandwidths are the restore/load direction (disk through the page cache)",
    },
  };
  // the document must satisfy the schema it is written for
  engineProfileSchema.parse(profile);
  return profile;
}

/** A device id from the CPU model name, e.g. "cpu-intel-xeon-processor" (override with --device). */
export function cpuDeviceName(cpuinfo?: string): string {
  let text = cpuinfo;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/cpuinfo", "utf8");
    } catch {
      text = "";
    }
  }
  const m = /^model name\s*:\s*(.+)$/m.exec(text);
  const name = (m?.[1] ?? "unknown")
    .toLowerCase()
    .replace(/\((r|tm|c)\)/g, "")
    .replace(/\bcpu\b|@.*$/g, "");
  return `cpu-${idSlug(name) || "unknown"}`;
}

/** The default device id: cpuDeviceName() on the CPU, else the backend and GPU, e.g. "cuda-nvidia-h100-80gb-hbm3". */
export function deviceId(info: DeviceInfo): string {
  return info.backend === "cpu" ? cpuDeviceName() : idSlug(`${info.backend} ${info.device}`);
}

function idSlug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

/** The RAM tier's restores and saves beside the GPU's pinned copies of the same size, or null on the CPU. */
export function describeTierAgainstPinned(notes: ContinuumProfileFile["notes"]["offload"]): string | null {
  const copy = notes.hostCopy;
  if (!copy) return null;
  const gbps = (bps: number) => `${(bps / 1e9).toFixed(1)} GB/s`;
  const share = (bps: number, of: number) => `${((100 * bps) / of).toFixed(0)}%`;
  return (
    `  RAM tier vs the GPU's copies of ${(notes.bytes / 2 ** 20).toFixed(0)} MiB: restore ${gbps(notes.restoreRamBps)} ` +
    `(${share(notes.restoreRamBps, copy.pinned.hostToDeviceBps)} of pinned ${gbps(copy.pinned.hostToDeviceBps)}; ` +
    `pageable ${gbps(copy.pageable.hostToDeviceBps)}), save ${gbps(notes.saveRamBps)} ` +
    `(${share(notes.saveRamBps, copy.pinned.deviceToHostBps)} of pinned ${gbps(copy.pinned.deviceToHostBps)}; ` +
    `pageable ${gbps(copy.pageable.deviceToHostBps)})`
  );
}

/** One-paragraph human summary of a profile, for the command's output. */
export function describeProfile(p: EngineProfileJson | ContinuumProfileFile): string {
  const { a, b, c } = p.prefill.quadratic ?? { a: 0, b: 0, c: 0 };
  const last = p.prefill.points.at(-1)!;
  const d1 = p.decode.points
    .filter((d) => d.batch === 1)
    .sort((x, y) => x.contextTokens - y.contextTokens)[0];
  const lines = [
    `${p.device} x${p.threads} threads, model ${p.model}`,
    `  prefill: ${last.tokens} tokens in ${last.seconds.toFixed(3)} s (${(last.tokens / last.seconds).toFixed(0)} tok/s); ` +
      `fit ${a.toExponential(3)} t^2 + ${b.toExponential(3)} t + ${c.toExponential(3)}`,
    d1
      ? `  decode: batch 1 at context ${d1.contextTokens}: ${(d1.seconds * 1000).toFixed(2)} ms/step; ${p.decode.points.length} points`
      : `  decode: ${p.decode.points.length} points`,
    `  step overhead ${(p.stepOverheadS * 1000).toFixed(2)} ms; KV ${p.kvBytesPerToken} B/token, capacity ${p.kvCapacityTokens} tokens`,
    `  offload: RAM ${(p.offload.cpuBandwidthBps / 1e9).toFixed(2)} GB/s, disk ${(p.offload.diskBandwidthBps / 1e9).toFixed(2)} GB/s`,
  ];
  const tierVsPinned = "notes" in p ? describeTierAgainstPinned(p.notes.offload) : null;
  if (tierVsPinned) lines.push(tierVsPinned);
  return lines.join("\n");
}
