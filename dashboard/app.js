// The dashboard's views: polls /dashboard/state once a second and draws it (Preact + htm, uPlot).
import { html, render, useEffect, useRef, useState } from "./preact-htm.js";

// ?poll=<ms> refreshes faster (at least every 100 ms); the default is once a second
const POLL_MS = Math.max(100, Number(new URLSearchParams(location.search).get("poll")) || 1000);
const KEY_STORAGE = "continuum-api-key";
/** the state beside the page: /dashboard/state, or /replicas/<name>/dashboard/state through a cluster's balancer */
const STATE_URL = `${location.pathname}/state`;
/** points the page keeps: an hour at one a second, as the server does */
const HISTORY_POINTS = 3600;
const WINDOWS = [
  ["5 min", 300],
  ["15 min", 900],
  ["1 h", 3600],
];
/** a line stops where the server took no point for this long (it was stopped, or the page was asleep) */
const GAP_S = 2.5;

function formatTokens(tokens) {
  if (tokens >= 1e6) return `${(tokens / 1e6).toFixed(1)}M`;
  if (tokens >= 1e4) return `${Math.round(tokens / 1e3)}k`;
  if (tokens >= 1e3) return `${(tokens / 1e3).toFixed(1)}k`;
  return String(Math.round(tokens));
}

function formatBytes(bytes) {
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
  if (bytes >= 2 ** 20) return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  return `${Math.max(1, Math.round(bytes / 2 ** 10))} KiB`;
}

function formatSeconds(s) {
  if (s === null || s === undefined) return "";
  if (!Number.isFinite(s)) return "no expiry";
  if (s >= 3600) return `${(s / 3600).toFixed(1)} h`;
  if (s >= 60) return `${(s / 60).toFixed(1)} min`;
  if (s >= 10) return `${s.toFixed(0)} s`;
  if (s >= 1) return `${s.toFixed(1)} s`;
  if (s >= 1e-3) return `${Math.round(s * 1000)} ms`;
  return `${Math.max(1, Math.round(s * 1e6))} µs`;
}

/** 0.001 -> "1 ms", 1 -> "1 s", 100 -> "100 s": a histogram's decade marks. */
function formatDecade(s) {
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${Math.round(s)} s`;
}

function formatNumber(x) {
  if (Number.isInteger(x) && Math.abs(x) < 1e4) return String(x);
  const a = Math.abs(x);
  if (a >= 1e4) return formatTokens(x);
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

const pad2 = (n) => String(n).padStart(2, "0");
function clock(timeS, withSeconds) {
  const d = new Date(timeS * 1000);
  const hm = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  return withSeconds ? `${hm}:${pad2(d.getSeconds())}` : hm;
}

function PoolBar({ pool }) {
  const parts = [
    ["running", "running", pool.runningBlocks],
    ["pinned", "pinned", pool.pinnedBlocks],
    ["cached", "cached, reusable", pool.cachedBlocks],
    ["free", "free", pool.freeBlocks],
  ];
  const tokens = (blocks) => formatTokens(blocks * pool.blockSizeTokens);
  return html`<div class="bar" data-testid="pool-bar">
      ${parts.map(
        ([key, , blocks]) =>
          html`<div data-part=${key} data-blocks=${blocks}
            style=${`width:${(100 * blocks) / pool.totalBlocks}%;background:var(--${key})`}></div>`,
      )}
    </div>
    <div class="legend">
      ${parts.map(
        ([key, label, blocks]) => html`<span><i style=${`background:var(--${key})`}></i>${label} ${tokens(blocks)}</span>`,
      )}
      <span>of ${tokens(pool.totalBlocks)} tokens</span>
    </div>`;
}

function TierBars({ tiers, blockSizeTokens }) {
  if (tiers.length === 0) return html`<p class="muted">No RAM or disk tier.</p>`;
  const names = { cpu: "RAM", disk: "disk" };
  return tiers.map(
    (tier) => html`<div class="tier" data-testid=${`tier-${tier.name}`}>
      <span>${`${names[tier.name] ?? tier.name} tier ${formatTokens(tier.usedBlocks * blockSizeTokens)} of ${formatTokens(tier.capacityBlocks * blockSizeTokens)} tokens`}</span>
      <div class="bar thin">
        <div style=${`width:${(100 * tier.usedBlocks) / tier.capacityBlocks}%;background:var(--tier)`}></div>
      </div>
    </div>`,
  );
}

/** Where a program's KV is now, as one short phrase per place, and the place that matters most. */
function kvPlaces(p) {
  const places = [];
  const kv = p.kv;
  if (kv?.poolHolder) {
    const how = { running: "running", pinned: "pinned", reusable: "reusable" }[kv.poolHolder];
    places.push([`pool-${kv.poolHolder}`, `pool, ${how} · ${formatTokens(kv.poolTokens)} tok`]);
  }
  if (kv?.tier) {
    const tier = kv.tier === "cpu" ? "RAM tier" : "disk tier";
    places.push([kv.tier, `${tier} · ${formatTokens(kv.tierTokens)} tok · ${formatBytes(kv.tierBytes)}`]);
  }
  if (places.length === 0 && p.turns === 0 && p.state !== "finished") places.push(["none", "none yet: first turn"]);
  if (places.length === 0) places.push(["gone", p.state === "finished" ? "gone" : "gone: recomputed next turn"]);
  return places;
}

const STATE_LABELS = {
  running: "running",
  waiting: "waiting",
  pinned: "pinned",
  tool: "in a tool call",
  idle: "idle, no tool call",
  finished: "finished",
};

function ProgramTable({ programs, numPrograms }) {
  if (programs.length === 0) return html`<p class="muted" data-testid="no-programs">No programs yet: they appear with their first request.</p>`;
  const shown = programs.filter((p) => p.state !== "finished").length;
  return html`<div class="table-box"><table data-testid="programs">
    <thead><tr><th>program</th><th>state</th><th>KV now</th><th>context tokens</th><th>turns</th><th>age</th><th>cached share</th></tr></thead>
    <tbody>
      ${programs.map((p) => {
        const places = kvPlaces(p);
        return html`<tr data-program=${p.id} data-state=${p.state} data-kv=${places[0][0]}>
          <td>${p.id}</td>
          <td><span class=${`state state-${p.state}`}>${STATE_LABELS[p.state] ?? p.state}</span>
            ${p.state === "pinned" ? html` <span data-testid="ttl">TTL ${formatSeconds(p.pinTtlLeftS)} left</span>` : ""}
            ${p.state === "finished" ? html` <span class="muted">${formatSeconds(p.finishedAgoS)} ago</span>` : ""}</td>
          <td class="kv">${places.map(([place, text]) => html`<span class=${`kv-${place}`}>${text}</span>`)}</td>
          <td>${p.contextTokens}</td>
          <td data-testid="turns">${p.turns}</td>
          <td>${formatSeconds(p.ageS)}</td>
          <td>${p.cachedShare === null ? "" : `${Math.round(100 * p.cachedShare)}%`}</td>
        </tr>`;
      })}
    </tbody>
  </table></div>
  ${numPrograms > shown ? html`<p class="muted">${numPrograms - shown} more programs not shown.</p>` : ""}`;
}

const SERIES_COLORS = ["#2563eb", "#ea580c", "#16a34a", "#7c3aed"];

/** The latest non-null value of each series in the window (a still screen shows where things stand). */
function latestValues(data) {
  return data.slice(1).map((values) => {
    for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return values[i];
    return null;
  });
}

/** uPlot's columns for the window, with a null row wherever the server took no point for a while. */
function columns(points, fields) {
  const times = [];
  const cols = fields.map(() => []);
  let previous = null;
  for (const p of points) {
    if (previous !== null && p.timeS - previous > GAP_S) {
      times.push(previous + 1);
      for (const col of cols) col.push(null);
    }
    times.push(p.timeS);
    fields.forEach(([key], i) => cols[i].push(p[key] ?? null));
    previous = p.timeS;
  }
  return [times, ...cols];
}

/** Counts start at 0 and end a little above their largest value (at least 1), not on a 0-100 axis. */
function countRange(_u, _min, max) {
  if (!(max > 0)) return [0, 1];
  const magnitude = 10 ** Math.floor(Math.log10(max));
  const steps = [1, 2, 2.5, 5, 10].map((s) => s * magnitude);
  return [0, steps.find((s) => s >= max * 1.05) ?? 10 * magnitude];
}

/** The x-axis labels uPlot drew, with their extents in CSS pixels (kept on the chart for tests and scripts). */
function drawnTicks(u) {
  const axis = u.axes[0];
  const ctx = u.ctx;
  ctx.save();
  ctx.font = axis.font[0];
  const ticks = [];
  (axis._values ?? []).forEach((text, i) => {
    if (text === null || text === undefined || text === "") return;
    const x = u.valToPos(axis._splits[i], "x");
    const half = ctx.measureText(String(text)).width / devicePixelRatio / 2;
    ticks.push([String(text), x - half, x + half]);
  });
  ctx.restore();
  return ticks;
}

/**
 * One uPlot chart of some history fields against time: a value axis scaled to the data, gaps where there is
 * no data, time labels spaced so they never touch, and a legend of current values (the hovered point's
 * while the mouse is over the chart).
 */
function Chart({ title, points, fields, unit = "", ratio = false, empty = "no data yet", emptyNote = null, idle = true }) {
  const box = useRef(null);
  const plot = useRef(null);
  const [hover, setHover] = useState(null);
  const data = columns(points, fields);
  // an idle counter reads 0: only a value other than 0 (any value, for a ratio) is data; a chart whose
  // zeros are only what the 1 s samples caught of a busy server (`idle` false) draws them as they are
  const hasData = !idle || data.slice(1).some((col) => col.some((v) => v !== null && (ratio || v !== 0)));
  useEffect(() => {
    if (plot.current === null) {
      const series = [
        {},
        ...fields.map(([, label], i) => ({ label, stroke: SERIES_COLORS[i], width: 2, spanGaps: false, points: { show: false } })),
      ];
      const opts = {
        width: box.current.clientWidth || 420,
        height: 150,
        series,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: ratio ? [0, 1] : countRange } },
        axes: [
          {
            space: 90,
            incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600],
            values: (_u, splits, _i, _space, incr) => splits.map((t) => clock(t, incr < 60)),
          },
          { size: 48, values: (_u, splits) => splits.map((v) => formatNumber(v)) },
        ],
        hooks: {
          setCursor: [(u) => setHover(u.cursor.idx ?? null)],
          draw: [(u) => (box.current.dataset.xTicks = JSON.stringify(drawnTicks(u)))],
        },
      };
      plot.current = new uPlot(opts, data, box.current);
      const resize = new ResizeObserver(() => {
        const width = box.current?.clientWidth;
        if (width && plot.current && Math.abs(width - plot.current.width) > 1) plot.current.setSize({ width, height: 150 });
      });
      resize.observe(box.current);
      return () => {
        resize.disconnect();
        plot.current?.destroy();
        plot.current = null;
      };
    }
    return undefined;
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
  }, [points]);
  const current = hover === null ? latestValues(data) : data.slice(1).map((col) => col[hover] ?? null);
  return html`<div class="chart" data-testid="chart" data-title=${title} data-empty=${hasData ? "false" : "true"}>
    <div class="chart-title">${title}</div>
    <div class="plot"><div ref=${box}></div>
      ${hasData ? "" : html`<div class="empty">${empty}</div>`}</div>
    ${hasData || !emptyNote ? "" : html`<p class="chart-note" data-testid="chart-note">${emptyNote}</p>`}
    <div class="chart-legend" data-testid="legend">
      ${fields.map(([, label], i) => {
        const value = current[i];
        const text = value === null ? "no data" : `${ratio ? `${Math.round(100 * value)}%` : formatNumber(value)}${unit}`;
        return html`<span data-series=${label} data-value=${value === null ? "" : value}>
          <i style=${`background:${SERIES_COLORS[i]}`}></i>${label} <b>${text}</b></span>`;
      })}
      <span class="muted">${hover === null ? "now" : clock(data[0][hover], true)}</span>
    </div>
  </div>`;
}

/** A latency histogram on log-spaced buckets, labelled at the decades; its count and median bucket above it. */
function Histogram({ title, bounds, counts, noun }) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) {
    return html`<div class="hist" data-testid="histogram" data-title=${title} data-count="0">
      <div class="chart-title">${title}</div><div class="muted hist-stats">no ${noun} yet</div>
      <div class="empty static">no data yet</div></div>`;
  }
  // from the decade below the shortest to the decade above the longest (bounds are four per decade)
  const lowest = counts.findIndex((c) => c > 0);
  const highest = counts.length - 1 - [...counts].reverse().findIndex((c) => c > 0);
  const first = Math.max(0, 4 * Math.floor((lowest - 1) / 4));
  const last = Math.min(counts.length - 1, 4 * Math.ceil(highest / 4));
  const shown = counts.slice(first, last + 1);
  const max = Math.max(...shown);
  let seen = 0;
  const median = counts.findIndex((c) => (seen += c) >= total / 2);
  const width = 100 / shown.length;
  return html`<div class="hist" data-testid="histogram" data-title=${title} data-count=${total}>
    <div class="chart-title">${title}</div>
    <div class="muted hist-stats">${total} ${noun}, median ≤ ${formatSeconds(bounds[median])}</div>
    <svg viewBox="0 0 100 40" preserveAspectRatio="none" class="bars">
      ${shown.map((c, i) => html`<rect x=${i * width + 0.5} width=${width - 1} y=${40 - (38 * c) / max} height=${(38 * c) / max}>
        <title>${`≤ ${formatSeconds(bounds[first + i])}: ${c}`}</title></rect>`)}
    </svg>
    <div class="hist-axis">
      ${shown.map((_, i) => {
        const bound = bounds[first + i];
        const decade = Math.abs(Math.log10(bound) - Math.round(Math.log10(bound))) < 1e-6;
        // the last mark ends at the right edge rather than past it
        const shift = i + 1 === shown.length ? "-100%" : "-50%";
        return decade ? html`<span style=${`left:${(i + 1) * width}%;transform:translateX(${shift})`}>${formatDecade(bound)}</span>` : "";
      })}
    </div>
  </div>`;
}

function FinishReasons({ reasons }) {
  const total = Object.values(reasons).reduce((a, b) => a + b, 0);
  return html`<div class="hist" data-testid="finish-reasons">
    <div class="chart-title">Finish reasons</div>
    <div class="muted hist-stats">${total} requests</div>
    ${Object.entries(reasons).map(
      ([reason, n]) => html`<div class="reason" data-reason=${reason} data-count=${n}>
        <span>${reason}</span><div class="bar thin"><div style=${`width:${total ? (100 * n) / total : 0}%;background:var(--running)`}></div></div><b>${n}</b></div>`,
    )}
  </div>`;
}

/** Why there are no pins: the TTL model's prices (a pin is worth it only when re-creating the KV costs more than keeping it). */
function pinsNote(pins) {
  if (pins.created > 0) return null;
  const prefill = `re-prefilling 1k tokens ${formatSeconds(pins.prefill1kTokensS)}`;
  if (pins.ramReload1kTokensS === null) return `The TTL cost model prices ${prefill}: no turn ended where a pin paid.`;
  return `The TTL cost model prices ${prefill}, reloading them from the RAM tier ${formatSeconds(pins.ramReload1kTokensS)}: KV waits in the tier instead (see KV now).`;
}

function KeyPrompt({ onKey }) {
  const [value, setValue] = useState("");
  return html`<section>
    <h2>API key</h2>
    <p>This server wants an API key for its state.</p>
    <form onSubmit=${(e) => { e.preventDefault(); onKey(value); }}>
      <input type="password" value=${value} onInput=${(e) => setValue(e.target.value)} />
      <button>Show</button>
    </form>
  </section>`;
}

function App() {
  const [state, setState] = useState(null);
  const [points, setPoints] = useState([]);
  const [error, setError] = useState(null);
  const [key, setKey] = useState(() => sessionStorage.getItem(KEY_STORAGE));
  const [needsKey, setNeedsKey] = useState(false);
  const [windowS, setWindowS] = useState(900);
  useEffect(() => {
    let stopped = false;
    let lastS = null;
    let kept = [];
    const poll = async () => {
      try {
        const headers = key ? { Authorization: `Bearer ${key}` } : {};
        const response = await fetch(`${STATE_URL}?since=${lastS ?? 0}`, { headers });
        if (response.status === 401) {
          setNeedsKey(true);
          return;
        }
        if (!response.ok) throw new Error(`state: HTTP ${response.status}`);
        const next = await response.json();
        if (next.history.length > 0) {
          kept = [...kept, ...next.history].slice(-HISTORY_POINTS);
          lastS = kept[kept.length - 1].timeS;
          setPoints(kept);
        }
        setState(next);
        setNeedsKey(false);
        setError(null);
      } catch (e) {
        setError(String(e.message ?? e));
      } finally {
        if (!stopped) setTimeout(poll, POLL_MS);
      }
    };
    poll();
    return () => {
      stopped = true;
    };
  }, [key]);
  const saveKey = (value) => {
    sessionStorage.setItem(KEY_STORAGE, value);
    setKey(value);
  };
  if (needsKey) return html`<${KeyPrompt} onKey=${saveKey} />`;
  if (state === null) return html`<main><p>${error ? html`<span class="error">${error}</span>` : "Loading…"}</p></main>`;
  const s = state.server;
  const endS = points.length > 0 ? points[points.length - 1].timeS : 0;
  const shown = points.filter((p) => p.timeS > endS - windowS);
  const spanS = shown.length > 1 ? shown[shown.length - 1].timeS - shown[0].timeS : 0;
  const busy = shown.some((p) => p.finishedPerS > 0 || p.promptTokensPerS > 0 || p.generatedTokensPerS > 0);
  const d = state.distributions;
  const last = points[points.length - 1];
  return html`<header>
      <h1>Continuum</h1>
      <span data-testid="instance"><b>${s.instance}</b> · model ${s.model}</span>
      <span>policy ${s.policy ?? "?"}</span>
      <span data-testid="device">${state.device.summary}</span>
      <span>${s.kv}</span>
      <span>v${s.version}</span>
      ${error ? html`<span class="error">${error}</span>` : ""}
    </header>
    <main>
      <div class="top">
        <section>
          <h2>KV pool</h2>
          <${PoolBar} pool=${state.pool} />
          <${TierBars} tiers=${state.tiers} blockSizeTokens=${state.pool.blockSizeTokens} />
        </section>
        <section class="numbers" data-testid="queue">
          <div><b data-testid="running">${state.running}</b>requests running</div>
          <div><b data-testid="waiting">${state.waiting}</b>waiting</div>
          <div><b data-testid="longest-wait">${state.waiting > 0 ? formatSeconds(state.longestWaitS) : "–"}</b>longest wait to start</div>
          <div><b>${state.numPrograms}</b>programs</div>
          <div><b data-testid="pins-created">${state.pins.created}</b>pins created</div>
          <div data-testid="answers"><b>${state.answers.clientError} · ${state.answers.rateLimited} · ${state.answers.serverError}</b>answers 4xx · 429 · 5xx</div>
          <div><b>${last ? formatNumber(last.generatedTokensPerS) : "0"}</b>tokens/s generated</div>
        </section>
      </div>
      <section>
        <h2>Programs</h2>
        <${ProgramTable} programs=${state.programs} numPrograms=${state.numPrograms} />
      </section>
      <section>
        <div class="section-head">
          <h2>Last ${formatSeconds(Math.min(spanS, windowS)) || "0 s"}</h2>
          <div class="windows">${WINDOWS.map(
            ([label, seconds]) => html`<button class=${seconds === windowS ? "on" : ""} onClick=${() => setWindowS(seconds)}>${label}</button>`,
          )}</div>
        </div>
        <div class="charts">
          <${Chart} title="Tokens / s" points=${shown}
            fields=${[["promptTokensPerS", "prompt"], ["cachedTokensPerS", "prompt, reused"], ["generatedTokensPerS", "generated"]]} />
          <${Chart} title="Queue (requests)" points=${shown} fields=${[["running", "running"], ["waiting", "waiting"]]}
            empty="idle: nothing running or waiting" idle=${!busy} />
          <${Chart} title="Finished requests / s" points=${shown} fields=${[["finishedPerS", "requests/s"]]} />
          <${Chart} title="Latency (s), requests of the last 30 s" points=${shown} unit=" s"
            fields=${[["ttftP50S", "TTFT p50"], ["ttftP99S", "TTFT p99"], ["latencyP50S", "request p50"], ["latencyP99S", "request p99"]]} />
          <${Chart} title="Program JCT (s), programs ended in the last 5 minutes" points=${shown} unit=" s"
            fields=${[["jctP50S", "JCT p50"], ["jctP99S", "JCT p99"]]} empty="no program ended yet" />
          <${Chart} title="Prefix hit ratio" points=${shown} ratio=${true} fields=${[["hitRatio", "reused / prompt tokens"]]} />
          <${Chart} title="Pins" points=${shown} empty="no pins yet" emptyNote=${pinsNote(state.pins)}
            fields=${[["pinnedPrograms", "pinned now"], ["pinsCreated", "created/s"], ["pinsExpired", "expired/s"], ["pinsSacrificed", "sacrificed/s"]]} />
        </div>
      </section>
      <section>
        <h2>Distributions, last ${formatSeconds(d.windowS)}</h2>
        <div class="dists">
          <${Histogram} title="TTFT" bounds=${d.bucketsS} counts=${d.ttft} noun="requests" />
          <${Histogram} title="ITL (per request)" bounds=${d.bucketsS} counts=${d.itl} noun="requests" />
          <${Histogram} title="Program JCT" bounds=${d.bucketsS} counts=${d.jct} noun="programs" />
          <${FinishReasons} reasons=${d.finishReasons} />
        </div>
      </section>
    </main>`;
}

render(html`<${App} />`, document.getElementById("app"));
