#!/usr/bin/env node
// Soak run (not a test): N agent clients against `continuum serve` on the built-in model for a while;
// prints the server's RSS over time, errors, and p50/p99 request latency.
//   node scripts/soak.mjs [--clients 64] [--minutes 10] [--port 8765] [-- extra serve flags]
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const dashdash = args.indexOf("--");
const own = dashdash < 0 ? args : args.slice(0, dashdash);
const serveFlags = dashdash < 0 ? [] : args.slice(dashdash + 1);
const option = (name, fallback) => {
  const i = own.indexOf(`--${name}`);
  return i < 0 ? fallback : Number(own[i + 1]);
};
const clients = option("clients", 64);
const minutes = option("minutes", 10);
const port = option("port", 8765);
const url = `http://127.0.0.1:${port}`;

const server = spawn(process.execPath, ["bin/continuum.js", "serve", "--port", String(port), ...serveFlags], {
  stdio: ["ignore", "pipe", "inherit"],
});
await new Promise((resolve, reject) => {
  let out = "";
  server.stdout.on("data", (data) => {
    out += data;
    if (out.includes("listening on")) resolve();
  });
  server.once("exit", (code) => reject(new Error(`serve exited with ${code} before listening`)));
});

const rssMb = () => {
  const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
};

const latenciesMs = [];
const errors = new Map();
let programs = 0;
const endAt = Date.now() + minutes * 60_000;

async function turn(programId, messages, last) {
  const started = performance.now();
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages, max_tokens: 16, job_id: programId, is_last_step: last }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(`${response.status} ${body?.error?.code ?? ""}`);
    latenciesMs.push(performance.now() - started);
    return body.choices[0].message.content ?? "";
  } catch (error) {
    const key = error instanceof Error ? error.message : String(error);
    errors.set(key, (errors.get(key) ?? 0) + 1);
    return null;
  }
}

async function agent(client) {
  for (let n = 0; Date.now() < endAt; n++) {
    const programId = `soak-${client}-${n}`;
    const messages = [
      { role: "user", content: `Task ${client}.${n}: list the files and fix the failing test.` },
    ];
    for (let t = 0; t < 4 && Date.now() < endAt; t++) {
      const reply = await turn(programId, messages, t === 3);
      if (reply === null) break;
      messages.push({ role: "assistant", content: reply });
      messages.push({ role: "user", content: `tool output ${t}: ${"line of output ".repeat(20)}` });
      await new Promise((r) => setTimeout(r, 200 + Math.random() * 800));
    }
    programs++;
  }
}

/** The server's own account of its memory (continuum:memory_bytes{owner}), in MB. */
async function memoryByOwner() {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const owners = {};
    for (const m of text.matchAll(/^continuum:memory_bytes\{[^}]*owner="(\w+)"[^}]*\} (\S+)$/gm)) {
      owners[m[1]] = Number(m[2]) / 2 ** 20;
    }
    return owners;
  } catch {
    return {};
  }
}
const ownersText = (owners) =>
  Object.entries(owners)
    .map(([owner, mb]) => `${owner} ${mb.toFixed(0)}`)
    .join(", ");

const samples = [];
const sampler = setInterval(async () => {
  const s = Math.round((Date.now() - (endAt - minutes * 60_000)) / 1000);
  const rss = rssMb();
  const owners = await memoryByOwner();
  samples.push({ s, rss, owners });
  process.stderr.write(
    `# ${s} s: RSS ${rss.toFixed(0)} MB (${ownersText(owners)}), ${latenciesMs.length} requests, ${programs} programs\n`,
  );
}, 30_000);
samples.push({ s: 0, rss: rssMb(), owners: await memoryByOwner() });
await Promise.all(Array.from({ length: clients }, (_, i) => agent(i)));
clearInterval(sampler);
samples.push({ s: minutes * 60, rss: rssMb(), owners: await memoryByOwner() });

const sorted = [...latenciesMs].sort((a, b) => a - b);
const pct = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
console.log(`clients ${clients}, ${minutes} min: ${latenciesMs.length} requests ok, ${programs} programs`);
console.log(`latency p50 ${pct(0.5).toFixed(0)} ms, p99 ${pct(0.99).toFixed(0)} ms`);
console.log(`errors: ${errors.size === 0 ? "none" : [...errors].map(([k, v]) => `${k} x${v}`).join(", ")}`);
console.log(`RSS MB over time: ${samples.map((x) => `${x.s}s ${x.rss.toFixed(0)}`).join(", ")}`);
console.log(`at the end, MB by owner: ${ownersText(samples.at(-1).owners)}`);
server.kill("SIGTERM");
await new Promise((resolve) => server.once("exit", resolve));
