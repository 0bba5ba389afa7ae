/**
 * The gateway's `/metrics`: its own `continuum:gateway_*` families per backend (up or not, its KV as the
 * gateway models it, turns held and forwarded, pins, what retention did and cost, what its KV events say),
 * then the backends' `vllm:` families summed over the backends that answer the scrape: counters and
 * histograms added sample by sample, the running and waiting gauges added, KV usage averaged by each
 * backend's capacity (other vLLM gauges, which do not add up, are left out).
 */

import { familyOf, parseExposition } from "../../gateway/backends/prometheus-text.js";
import type { Gateway, GatewayBackend } from "../../gateway/gateway.js";

const SCRAPE_TIMEOUT_MS = 2000;
const ADDED_GAUGES = new Set([
  "vllm:num_requests_running",
  "vllm:num_requests_waiting",
  "vllm:num_requests_swapped",
]);
const AVERAGED_GAUGES = new Set(["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]);

interface Family {
  readonly help: string;
  readonly type: "gauge" | "counter";
  readonly samples: string[];
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function labelText(labels: Readonly<Record<string, string>>): string {
  const pairs = Object.entries(labels);
  return pairs.length === 0 ? "" : `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

class Families {
  private readonly families = new Map<string, Family>();

  add(
    name: string,
    type: "gauge" | "counter",
    help: string,
    labels: Record<string, string>,
    value: number,
  ): void {
    let family = this.families.get(name);
    if (!family) {
      family = { help, type, samples: [] };
      this.families.set(name, family);
    }
    family.samples.push(`${name}${labelText(labels)} ${Number.isFinite(value) ? value : 0}`);
  }

  text(): string {
    let out = "";
    for (const [name, family] of this.families) {
      out += `# HELP ${name} ${family.help}\n# TYPE ${name} ${family.type}\n${family.samples.join("\n")}\n`;
    }
    return out;
  }
}

function gatewayFamilies(gateway: Gateway): string {
  const f = new Families();
  for (const backend of gateway.backends) {
    const b = { backend: backend.spec.name };
    f.add(
      "continuum:gateway_backend_up",
      "gauge",
      "the backend answers and takes turns (1), or is down and probed again (0)",
      { ...b, url: backend.spec.url, engine: backend.info?.engine ?? "unknown" },
      backend.state === "up" ? 1 : 0,
    );
    f.add(
      "continuum:gateway_backend_failovers_total",
      "counter",
      "times the backend was taken out",
      b,
      backend.failovers,
    );
    const info = backend.info;
    if (info) {
      f.add(
        "continuum:gateway_backend_kv_capacity_tokens",
        "gauge",
        "KV tokens the backend holds, as read from it",
        b,
        info.capacityTokens,
      );
    }
    const lane = backend.lane;
    if (lane) laneFamilies(f, b, lane);
    const index = backend.kvIndex;
    if (index) {
      f.add(
        "continuum:gateway_kv_event_resident_blocks",
        "gauge",
        "blocks the backend's KV events say it holds",
        b,
        index.residentBlocks,
      );
      f.add(
        "continuum:gateway_kv_event_batches_total",
        "counter",
        "KV event batches received",
        b,
        index.stats.batches,
      );
      f.add(
        "continuum:gateway_kv_event_missed_batches_total",
        "counter",
        "KV event batches missing from the sequence",
        b,
        index.stats.missedBatches,
      );
      f.add(
        "continuum:gateway_kv_event_stored_blocks_total",
        "counter",
        "blocks the backend stored, by its events",
        b,
        index.stats.storedBlocks,
      );
      f.add(
        "continuum:gateway_kv_event_removed_blocks_total",
        "counter",
        "blocks the backend removed, by its events",
        b,
        index.stats.removedBlocks,
      );
      f.add(
        "continuum:gateway_kv_event_attributed_turns_total",
        "counter",
        "turns whose blocks the events named",
        b,
        index.stats.attributed,
      );
      f.add(
        "continuum:gateway_kv_event_unattributed_turns_total",
        "counter",
        "turns whose blocks the events did not tell apart",
        b,
        index.stats.unattributed,
      );
    }
  }
  f.add(
    "continuum:gateway_moved_turns_total",
    "counter",
    "turns sent to another backend than their program's previous one, which was down",
    {},
    gateway.movedTurns,
  );
  return f.text();
}

function laneFamilies(
  f: Families,
  b: Record<string, string>,
  lane: NonNullable<GatewayBackend["lane"]>,
): void {
  const s = lane.scheduler;
  const stats = lane.stats;
  f.add(
    "continuum:gateway_held_turns",
    "gauge",
    "turns waiting in the gateway for their backend",
    b,
    lane.heldTurns,
  );
  f.add("continuum:gateway_forwarded_turns", "gauge", "turns the backend is running", b, lane.forwardedTurns);
  f.add(
    "continuum:gateway_turns_forwarded_total",
    "counter",
    "turns sent to the backend",
    b,
    stats.turnsForwarded,
  );
  f.add(
    "continuum:gateway_hold_seconds_total",
    "counter",
    "seconds turns waited in the gateway before they were sent",
    b,
    stats.heldSeconds,
  );
  f.add(
    "continuum:gateway_turns_failed_total",
    "counter",
    "turns the backend refused or cut",
    b,
    stats.turnsFailed,
  );
  f.add(
    "continuum:gateway_model_kv_usage_perc",
    "gauge",
    "the gateway's model of the backend's KV: share held by running turns and pins",
    b,
    s.kvUsageFraction(),
  );
  f.add(
    "continuum:gateway_pinned_programs",
    "gauge",
    "programs whose KV the gateway keeps on the backend",
    b,
    s.numPinnedPrograms,
  );
  f.add("continuum:gateway_pinned_tokens", "gauge", "KV tokens of the pinned programs", b, s.numPinnedTokens);
  f.add(
    "continuum:gateway_pins_created_total",
    "counter",
    "pins made at the end of a turn",
    b,
    s.stats.pinsCreated,
  );
  f.add(
    "continuum:gateway_pins_reused_total",
    "counter",
    "pins whose program's next turn came in time",
    b,
    s.stats.pinsReused,
  );
  f.add("continuum:gateway_pins_expired_total", "counter", "pins whose TTL ran out", b, s.stats.pinsExpired);
  f.add(
    "continuum:gateway_pins_sacrificed_total",
    "counter",
    "pins given up under memory pressure",
    b,
    s.stats.pinsSacrificed,
  );
  f.add(
    "continuum:gateway_prompt_tokens_total",
    "counter",
    "prompt tokens of the backend's answers",
    b,
    stats.promptTokens,
  );
  f.add(
    "continuum:gateway_cached_tokens_total",
    "counter",
    "of them, tokens the backend reported cached",
    b,
    stats.cachedTokens,
  );
  f.add(
    "continuum:gateway_completion_tokens_total",
    "counter",
    "output tokens of the backend's answers",
    b,
    stats.completionTokens,
  );
  f.add(
    "continuum:gateway_returning_chain_tokens_total",
    "counter",
    "returning turns: their previous turn's KV, by the backend's events",
    b,
    stats.returningChainTokens,
  );
  f.add(
    "continuum:gateway_returning_resident_tokens_total",
    "counter",
    "returning turns: of it, what the backend still held",
    b,
    stats.returningResidentTokens,
  );
  const r = lane.retention.stats;
  f.add(
    "continuum:gateway_slot_hits_total",
    "counter",
    "llama-server: turns sent to their program's own slot",
    b,
    r.slotHits,
  );
  f.add(
    "continuum:gateway_turns_sent_ahead_total",
    "counter",
    "llama-server with one slot: turns sent while the slot still ran, for llama-server to start next",
    b,
    r.turnsSentAhead,
  );
  f.add(
    "continuum:gateway_pins_displaced_total",
    "counter",
    "llama-server: pinned slots given to another program",
    b,
    r.pinsDisplaced,
  );
  f.add(
    "continuum:gateway_slot_saves_total",
    "counter",
    "llama-server: slots saved to disk (--slot-save-path)",
    b,
    r.slotSaves,
  );
  f.add(
    "continuum:gateway_slot_restores_total",
    "counter",
    "llama-server: slots restored from disk",
    b,
    r.slotRestores,
  );
  f.add(
    "continuum:gateway_keepalives_total",
    "counter",
    "vLLM/SGLang: keep-alive requests for pinned prefixes",
    b,
    r.keepAlives,
  );
  f.add(
    "continuum:gateway_keepalive_prompt_tokens_total",
    "counter",
    "their prompt tokens",
    b,
    r.keepAlivePromptTokens,
  );
  f.add(
    "continuum:gateway_keepalive_computed_tokens_total",
    "counter",
    "tokens the backend computed for them (not cached, output included)",
    b,
    r.keepAliveComputedTokens,
  );
  f.add(
    "continuum:gateway_keepalive_seconds_total",
    "counter",
    "their time, request to answer",
    b,
    r.keepAliveSeconds,
  );
  f.add(
    "continuum:gateway_keepalive_failures_total",
    "counter",
    "keep-alives the backend did not answer",
    b,
    r.keepAliveFailures,
  );
  f.add(
    "continuum:gateway_keepalive_unreported_total",
    "counter",
    "keep-alives whose backend did not report cached tokens",
    b,
    r.keepAliveUnreported,
  );
}

async function scrape(backend: GatewayBackend): Promise<string | null> {
  try {
    const response = await fetch(`${backend.spec.url}/metrics`, {
      signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS),
    });
    return response.ok ? await response.text() : null;
  } catch {
    return null;
  }
}

/** vLLM's families over the backends, summed (see the module's comment). */
async function summedVllm(gateway: Gateway, modelName: string): Promise<string> {
  const up = gateway.upBackends;
  const texts = await Promise.all(up.map(scrape));
  const sums = new Map<
    string,
    { type: string; samples: Map<string, { labels: Record<string, string>; value: number }> }
  >();
  const usage = new Map<string, { weighted: number; capacity: number }>();
  texts.forEach((text, i) => {
    if (text === null) return;
    const capacity = up[i]?.info?.capacityTokens ?? 0;
    const { types, samples } = parseExposition(text);
    for (const sample of samples) {
      if (!sample.name.startsWith("vllm:")) continue;
      const family = familyOf(sample.name, types);
      const type = types.get(family) ?? "untyped";
      if (AVERAGED_GAUGES.has(family)) {
        const u = usage.get(family) ?? { weighted: 0, capacity: 0 };
        u.weighted += sample.value * capacity;
        u.capacity += capacity;
        usage.set(family, u);
        continue;
      }
      if (!(type === "counter" || type === "histogram" || ADDED_GAUGES.has(family))) continue;
      const labels = {
        ...sample.labels,
        ...("model_name" in sample.labels ? { model_name: modelName } : {}),
      };
      const key = `${sample.name}${labelText(labels)}`;
      const entry = sums.get(family) ?? { type, samples: new Map() };
      sums.set(family, entry);
      const existing = entry.samples.get(key);
      if (existing) existing.value += sample.value;
      else entry.samples.set(key, { labels, value: sample.value });
    }
  });
  let out = "";
  for (const [family, { type, samples }] of sums) {
    out += `# TYPE ${family} ${type}\n`;
    for (const [key, { value }] of samples) out += `${key} ${value}\n`;
  }
  for (const [family, { weighted, capacity }] of usage) {
    out += `# TYPE ${family} gauge\n${family}${labelText({ model_name: modelName })} ${capacity > 0 ? weighted / capacity : 0}\n`;
  }
  return out;
}

export async function gatewayExposition(gateway: Gateway, modelName: string): Promise<string> {
  return gatewayFamilies(gateway) + (await summedVllm(gateway, modelName));
}
