// The dashboard's views: polls /dashboard/state once a second and draws it (Preact + htm, uPlot).
import { html, render, useEffect, useRef, useState } from "/dashboard/assets/preact-htm.js";

// ?poll=<ms> refreshes faster (at least every 100 ms); the default is once a second
const POLL_MS = Math.max(100, Number(new URLSearchParams(location.search).get("poll")) || 1000);
const KEY_STORAGE = "continuum-api-key";

function formatTokens(tokens) {
  if (tokens >= 1e6) return `${(tokens / 1e6).toFixed(1)}M`;
  if (tokens >= 1e4) return `${Math.round(tokens / 1e3)}k`;
  return String(tokens);
}

function formatSeconds(s) {
  if (s === null || s === undefined) return "";
  if (!Number.isFinite(s)) return "no expiry";
  if (s >= 3600) return `${(s / 3600).toFixed(1)} h`;
  if (s >= 60) return `${(s / 60).toFixed(1)} min`;
  return `${s.toFixed(1)} s`;
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
  if (tiers.length === 0) return html`<p>No RAM or disk tier.</p>`;
  return tiers.map(
    (tier) => html`<div style="margin-top:8px" data-testid=${`tier-${tier.name}`}>
      <div>${`${tier.name} tier: ${formatTokens(tier.usedBlocks * blockSizeTokens)} of ${formatTokens(tier.capacityBlocks * blockSizeTokens)} tokens`}</div>
      <div class="bar" style="height:12px">
        <div style=${`width:${(100 * tier.usedBlocks) / tier.capacityBlocks}%;background:var(--cached)`}></div>
      </div>
    </div>`,
  );
}

function ProgramTable({ programs, numPrograms }) {
  return html`<table data-testid="programs">
    <thead><tr><th>program</th><th>state</th><th>context tokens</th><th>turns</th><th>since arrival</th><th>cached share</th></tr></thead>
    <tbody>
      ${programs.map(
        (p) => html`<tr data-program=${p.id} data-state=${p.state}>
          <td>${p.id}</td>
          <td><span class=${`state state-${p.state}`}>${p.state === "tool" ? "in a tool call" : p.state}</span>
            ${p.state === "pinned" ? ` TTL ${formatSeconds(p.pinTtlLeftS)}` : ""}</td>
          <td>${p.contextTokens}</td>
          <td>${p.turns}</td>
          <td>${formatSeconds(p.ageS)}</td>
          <td>${p.cachedShare === null ? "" : `${Math.round(100 * p.cachedShare)}%`}</td>
        </tr>`,
      )}
    </tbody>
  </table>
  ${numPrograms > programs.length ? html`<p>${numPrograms - programs.length} more programs not shown.</p>` : ""}`;
}

const SERIES_COLORS = ["#2563eb", "#ea580c", "#16a34a", "#7c3aed"];

/** One uPlot chart of some history fields against time. */
function Chart({ title, history, fields }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const data = [history.map((p) => p.timeS), ...fields.map(([key]) => history.map((p) => p[key]))];
    if (plot.current === null) {
      const series = [{}, ...fields.map(([, label], i) => ({ label, stroke: SERIES_COLORS[i], width: 2, spanGaps: true }))];
      plot.current = new uPlot({ title, width: box.current.clientWidth || 420, height: 180, series }, data, box.current);
    } else {
      plot.current.setData(data);
    }
  }, [history]);
  return html`<div ref=${box}></div>`;
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
  const [error, setError] = useState(null);
  const [key, setKey] = useState(() => sessionStorage.getItem(KEY_STORAGE));
  const [needsKey, setNeedsKey] = useState(false);
  useEffect(() => {
    let stopped = false;
    const poll = async () => {
      try {
        const headers = key ? { Authorization: `Bearer ${key}` } : {};
        const response = await fetch("/dashboard/state", { headers });
        if (response.status === 401) {
          setNeedsKey(true);
          return;
        }
        if (!response.ok) throw new Error(`state: HTTP ${response.status}`);
        setState(await response.json());
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
  return html`<header>
      <h1>Continuum</h1>
      <span>model ${s.model}</span>
      <span>policy ${s.policy ?? "?"}</span>
      <span data-testid="device">${state.device.summary}</span>
      <span>${s.kv}</span>
      <span>v${s.version}</span>
      ${error ? html`<span class="error">${error}</span>` : ""}
    </header>
    <main>
      <section>
        <h2>KV pool</h2>
        <${PoolBar} pool=${state.pool} />
        <${TierBars} tiers=${state.tiers} blockSizeTokens=${state.pool.blockSizeTokens} />
      </section>
      <section class="numbers" data-testid="queue">
        <div><b data-testid="running">${state.running}</b>requests running</div>
        <div><b data-testid="waiting">${state.waiting}</b>waiting</div>
        <div><b>${state.numPrograms}</b>programs</div>
      </section>
      <section>
        <h2>Last ${state.history.length < 120 ? `${state.history.length} s` : `${Math.round(state.history.length / 60)} minutes`}</h2>
        <div class="charts">
          <${Chart} title="Finished requests / s" history=${state.history} fields=${[["finishedPerS", "requests/s"]]} />
          <${Chart} title="Latency (s), requests of the last 30 s" history=${state.history}
            fields=${[["ttftP50S", "TTFT p50"], ["ttftP99S", "TTFT p99"], ["latencyP50S", "request p50"], ["latencyP99S", "request p99"]]} />
          <${Chart} title="Program JCT (s), programs ended in the last 5 minutes" history=${state.history}
            fields=${[["jctP50S", "JCT p50"], ["jctP99S", "JCT p99"]]} />
          <${Chart} title="Prefix hit ratio" history=${state.history} fields=${[["hitRatio", "reused / prompt tokens"]]} />
          <${Chart} title="Pins per second" history=${state.history}
            fields=${[["pinsCreated", "created"], ["pinsExpired", "expired"], ["pinsSacrificed", "sacrificed"]]} />
          <${Chart} title="Queue" history=${state.history} fields=${[["running", "running"], ["waiting", "waiting"]]} />
        </div>
      </section>
      <section>
        <h2>Programs</h2>
        <${ProgramTable} programs=${state.programs} numPrograms=${state.numPrograms} />
      </section>
    </main>`;
}

render(html`<${App} />`, document.getElementById("app"));
