/**
 * What a backend is and how much KV it holds, read from the backend itself (`continuum gateway` names no
 * engine sizes): vLLM's `vllm:cache_config_info` (num_gpu_blocks x block_size), llama-server's `/props`
 * (total_slots x default_generation_settings.n_ctx, each slot's context), SGLang's server info
 * (max_total_num_tokens), a Continuum replica's own `vllm:cache_config_info`. The engine is told apart by
 * what answers: `continuum:` families on /metrics (a Continuum replica also writes vLLM's), `vllm:`
 * families, llama-server's `/props`, SGLang's `/get_server_info`.
 */
import type { BackendSpec, EngineKind } from "./backend-spec.js";
import { parseExposition } from "./prometheus-text.js";

export interface BackendInfo {
  readonly engine: EngineKind;
  /** the model the backend serves (its `/v1/models` id): the `model` of every request forwarded to it */
  readonly modelId: string;
  /** KV tokens the backend holds in all */
  readonly capacityTokens: number;
  /** its KV block size (vLLM's, SGLang's page size; 16 for llama-server, which has none) */
  readonly blockSizeTokens: number;
  /** context of one sequence: a prompt and its output fit in this many tokens */
  readonly contextTokens: number;
  /** llama-server's slots (requests it runs at once), else null */
  readonly slots: number | null;
  /** requests the backend runs at once when it says so (SGLang's max_running_requests, llama-server's slots) */
  readonly maxRunning: number | null;
  /** the backend answers Anthropic's Messages API itself (else the gateway translates to chat) */
  readonly messagesApi: boolean;
  /** the backend answers `/v1/messages/count_tokens` itself (else the gateway tokenizes the chat) */
  readonly countTokensApi: boolean;
}

export class BackendProbeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BackendProbeError";
  }
}

/** How long one probe request may take. */
const PROBE_TIMEOUT_MS = 5000;
/** llama-server keeps no block size; the gateway's model of it counts in blocks of this many tokens. */
const LLAMA_SERVER_BLOCK = 16;

async function get(url: string): Promise<{ status: number; text: string } | null> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    return { status: response.status, text: await response.text() };
  } catch {
    return null;
  }
}

function jsonOf(reply: { status: number; text: string } | null): Record<string, unknown> | null {
  if (reply === null || reply.status !== 200) return null;
  try {
    const value = JSON.parse(reply.text) as unknown;
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function positive(value: unknown): number | null {
  const n = typeof value === "string" ? Number(value) : value;
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? n : null;
}

interface Models {
  readonly id: string;
  readonly maxModelLen: number | null;
}

async function models(url: string): Promise<Models> {
  const reply = await get(`${url}/v1/models`);
  if (reply === null) throw new BackendProbeError(`${url} is unreachable`);
  const data = jsonOf(reply)?.["data"];
  const first = Array.isArray(data) ? (data[0] as Record<string, unknown> | undefined) : undefined;
  if (typeof first?.["id"] !== "string") {
    throw new BackendProbeError(`${url}/v1/models answered ${reply.status} without a model id`);
  }
  return { id: first["id"], maxModelLen: positive(first["max_model_len"]) };
}

/** Which engine answers at `url`, from what it serves. */
export async function detectEngine(url: string): Promise<EngineKind> {
  const metrics = await get(`${url}/metrics`);
  if (metrics === null && (await get(`${url}/v1/models`)) === null) {
    throw new BackendProbeError(`${url} is unreachable`);
  }
  if (metrics?.status === 200) {
    if (/^continuum:/m.test(metrics.text)) return "continuum";
    if (/^vllm:/m.test(metrics.text)) return "vllm";
    if (/^sglang:/m.test(metrics.text)) return "sglang";
  }
  if (positive(jsonOf(await get(`${url}/props`))?.["total_slots"]) !== null) return "llama-server";
  if (
    jsonOf(await get(`${url}/get_server_info`)) !== null ||
    jsonOf(await get(`${url}/server_info`)) !== null
  )
    return "sglang";
  throw new BackendProbeError(
    `${url} answers, but not as vLLM (vllm: metrics), SGLang (/get_server_info), llama-server (/props) or Continuum: name it with --engine`,
  );
}

async function vllmProtocol(spec: BackendSpec, engine: EngineKind): Promise<BackendInfo> {
  const reply = await get(`${spec.url}/metrics`);
  if (reply === null) throw new BackendProbeError(`${spec.url} is unreachable`);
  const info = parseExposition(reply.status === 200 ? reply.text : "").samples.find(
    (s) => s.name === "vllm:cache_config_info",
  );
  const blockSize = positive(info?.labels["block_size"]);
  const blocks = positive(info?.labels["num_gpu_blocks"]);
  if ((blockSize === null || blocks === null) && spec.kvTokens === null) {
    throw new BackendProbeError(
      `${spec.url}/metrics has no vllm:cache_config_info with block_size and num_gpu_blocks: give the backend's KV size as ?kv-tokens=N`,
    );
  }
  const { id, maxModelLen } = await models(spec.url);
  const capacityTokens = spec.kvTokens ?? (blockSize as number) * (blocks as number);
  return {
    engine,
    modelId: id,
    capacityTokens,
    blockSizeTokens: blockSize ?? 16,
    contextTokens: Math.min(maxModelLen ?? capacityTokens, capacityTokens),
    slots: null,
    maxRunning: null,
    messagesApi: true,
    countTokensApi: engine === "continuum",
  };
}

async function llamaServer(spec: BackendSpec): Promise<BackendInfo> {
  const props = jsonOf(await get(`${spec.url}/props`));
  const slots = positive(props?.["total_slots"]);
  const settings = props?.["default_generation_settings"] as Record<string, unknown> | undefined;
  const slotContext = positive(settings?.["n_ctx"]);
  if (slots === null || slotContext === null) {
    throw new BackendProbeError(`${spec.url}/props has no total_slots and default_generation_settings.n_ctx`);
  }
  const { id } = await models(spec.url);
  return {
    engine: "llama-server",
    modelId: id,
    capacityTokens: spec.kvTokens ?? slots * slotContext,
    blockSizeTokens: LLAMA_SERVER_BLOCK,
    contextTokens: slotContext,
    slots,
    maxRunning: slots,
    messagesApi: true,
    countTokensApi: true,
  };
}

async function sglang(spec: BackendSpec): Promise<BackendInfo> {
  const info =
    jsonOf(await get(`${spec.url}/get_server_info`)) ?? jsonOf(await get(`${spec.url}/server_info`));
  if (info === null) throw new BackendProbeError(`${spec.url} has no /get_server_info`);
  const states = info["internal_states"];
  const state = (Array.isArray(states) ? states[0] : undefined) as Record<string, unknown> | undefined;
  const total = positive(info["max_total_num_tokens"]) ?? positive(state?.["max_total_num_tokens"]);
  if (total === null && spec.kvTokens === null) {
    throw new BackendProbeError(
      `${spec.url}/get_server_info has no max_total_num_tokens: give the backend's KV size as ?kv-tokens=N`,
    );
  }
  const { id, maxModelLen } = await models(spec.url);
  const capacityTokens = spec.kvTokens ?? (total as number);
  return {
    engine: "sglang",
    modelId: id,
    capacityTokens,
    blockSizeTokens: positive(info["page_size"]) ?? 1,
    contextTokens: Math.min(
      maxModelLen ?? positive(info["context_length"]) ?? capacityTokens,
      capacityTokens,
    ),
    slots: null,
    maxRunning: positive(info["max_running_requests"]) ?? positive(state?.["max_running_requests"]),
    messagesApi: false,
    countTokensApi: false,
  };
}

/** Reads a backend's engine (unless given) and KV capacity; throws BackendProbeError saying what is missing. */
export async function probeBackend(spec: BackendSpec, engine: EngineKind | null): Promise<BackendInfo> {
  const kind = engine ?? (await detectEngine(spec.url));
  if (kind === "llama-server") return llamaServer(spec);
  if (kind === "sglang") return sglang(spec);
  return vllmProtocol(spec, kind);
}
