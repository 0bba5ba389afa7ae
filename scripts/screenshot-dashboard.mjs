// Screenshot of `continuum serve`'s live dashboard under a little agent load, for docs/images/dashboard.png.
// Usage: npm run build && node scripts/screenshot-dashboard.mjs [out.png]   (needs Debian's chromium)
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import puppeteer from "puppeteer-core";

const OUT = resolve(process.argv[2] ?? "docs/images/dashboard.png");
const PORT = 18000 + Math.floor(Math.random() * 1000);
const BASE = `http://127.0.0.1:${PORT}`;
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

const server = spawn(
  process.execPath,
  [
    "bin/continuum.js",
    "serve",
    "--builtin-model",
    "tiny",
    "--port",
    String(PORT),
    "--kv-cache-tokens",
    "4096",
    // pins every tool-call turn for 2 s from the start: the picture shows pins without a warm-up
    "--scheduling-policy",
    "continuum-heuristic",
  ],
  { stdio: ["ignore", "inherit", "inherit"] },
);

async function waitForServer() {
  for (let i = 0; i < 120; i++) {
    try {
      if ((await fetch(`${BASE}/health`)).ok) return;
    } catch {}
    await sleep(250);
  }
  throw new Error("continuum serve did not start");
}

/** One agent program: turns ending in a tool call, a tool that takes a while, a last turn. */
async function agent(n, turns) {
  const messages = [
    { role: "user", content: `Task ${n}: ${"fix the failing test in module ".repeat(20 + n)}` },
  ];
  for (let turn = 0; turn < turns; turn++) {
    const last = turn === turns - 1;
    const response = await fetch(`${BASE}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Program-Id": `agent-${n}`,
        "X-Last-Step": String(last),
      },
      body: JSON.stringify({ messages, max_tokens: 24, this_func_call: last ? null : "pytest" }),
    });
    const body = await response.json();
    messages.push({ role: "assistant", content: body.choices[0].message.content ?? "" });
    messages.push({ role: "user", content: `output of step ${turn}: ${"ok ".repeat(30)}` });
    await sleep(600 + 150 * n);
  }
}

try {
  await waitForServer();
  const load = Promise.all(Array.from({ length: 8 }, (_, n) => sleep(2000 * n).then(() => agent(n, 14))));
  await sleep(15_000);
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox"],
    headless: true,
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1100 });
    await page.goto(`${BASE}/dashboard`);
    await page.waitForSelector("[data-testid=programs] tr[data-program]");
    await sleep(2000);
    await page.screenshot({ path: OUT, fullPage: true });
    console.log(`wrote ${OUT}`);
  } finally {
    await browser.close();
  }
  await load;
} finally {
  server.kill("SIGTERM");
}
