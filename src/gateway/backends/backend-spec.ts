/**
 * A backend as `continuum gateway --backend` names it: its base URL, with what the backend cannot say about
 * itself as query parameters, as `continuum cluster --replica` takes `?agent-port=`:
 * - `kv-tokens=N`: the KV tokens it holds in all, where its own report would mislead (llama-server run with
 *   `--kv-unified`, whose `/props` gives each slot the whole context);
 * - `kv-events=tcp://host:port`: where it publishes vLLM's KV events (vLLM's `--kv-events-config` endpoint,
 *   `continuum serve --kv-events-endpoint`), which the gateway subscribes to.
 */
export const ENGINE_KINDS = ["vllm", "sglang", "llama-server", "continuum"] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

export interface BackendSpec {
  /** b1, b2, ... in the order given */
  readonly name: string;
  /** base URL without a trailing slash or query, e.g. http://10.0.0.11:8000 */
  readonly url: string;
  readonly kvTokens: number | null;
  readonly kvEventsEndpoint: string | null;
}

const KNOWN_PARAMS = new Set(["kv-tokens", "kv-events"]);

export function parseBackendSpec(raw: string, index: number): BackendSpec {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`--backend ${JSON.stringify(raw)} is not a URL (e.g. http://127.0.0.1:8080)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`--backend ${raw}: only http:// and https:// backends are served`);
  }
  for (const key of url.searchParams.keys()) {
    if (!KNOWN_PARAMS.has(key)) {
      throw new Error(`--backend ${raw}: unknown parameter ${key} (known: ${[...KNOWN_PARAMS].join(", ")})`);
    }
  }
  const tokens = url.searchParams.get("kv-tokens");
  const kvTokens = tokens === null ? null : Number(tokens);
  if (kvTokens !== null && !(Number.isInteger(kvTokens) && kvTokens > 0)) {
    throw new Error(`--backend ${raw}: kv-tokens must be a positive whole number of tokens, got ${tokens}`);
  }
  const events = url.searchParams.get("kv-events");
  if (events !== null && !/^tcp:\/\/[^/]+:\d+$/.test(events)) {
    throw new Error(`--backend ${raw}: kv-events must be tcp://host:port, got ${events}`);
  }
  const base = `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
  return { name: `b${index + 1}`, url: base, kvTokens, kvEventsEndpoint: events };
}
