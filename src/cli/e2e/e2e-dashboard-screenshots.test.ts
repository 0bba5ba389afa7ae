/**
 * The live dashboard as an operator first sees it, in headless Chromium (Debian's `chromium` through
 * puppeteer-core) at 1400x1000, against `continuum serve` with its default flags on the built-in tiny model
 * (cachettl-adaptive, the RAM tier a CPU engine gets): idle, while six agent programs of ten turns each run,
 * and after they finished. Each state is checked on the DOM (time labels apart, legends that show values
 * without a mouse, idle charts that say so, every program's KV located, a 10-turn program showing 10 turns,
 * the programs above the fold) and saved as a PNG: to $CONTINUUM_SCREENSHOT_DIR when set
 * (`npm run screenshot:dashboard` sets docs/images, the pictures the README shows), else to a temporary
 * directory kept only when the test fails. Last, the page is fed an hour of history to check its time
 * axis past a minute.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";
import type { Page } from "puppeteer-core";
import { startSupervisorServer } from "../../cluster/supervisor-server.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { chromiumSkip, launchChromium } from "../../server/test-support/headless-chromium.js";
import { sleep, startLlamaServer } from "../test-support/llama-server.js";

const skip = llamaSkip || chromiumSkip;

const AGENTS = 6;
const TURNS = 10;

/** One agent program: turns ending in a tool call, a short tool, a last turn. */
async function agent(url: string, n: number): Promise<void> {
  const messages = [
    { role: "user", content: `Task ${n}: ${"fix the failing test in module ".repeat(10 + 2 * n)}` },
  ];
  for (let turn = 0; turn < TURNS; turn++) {
    const last = turn === TURNS - 1;
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Program-Id": `agent-${n}`,
        "X-Last-Step": String(last),
      },
      body: JSON.stringify({
        messages,
        max_tokens: 6,
        ignore_eos: true,
        this_func_call: last ? null : "pytest",
      }),
    });
    assert.equal(response.status, 200);
    const body = (await response.json()) as { choices: { message: { content: string | null } }[] };
    messages.push({ role: "assistant", content: body.choices[0]?.message.content ?? "" });
    messages.push({ role: "user", content: `output of step ${turn}: ${"ok ".repeat(12)}` });
    await sleep(300 + 150 * (n % 3));
  }
}

type Tick = [text: string, left: number, right: number];

/** Polls `check` (which reads the page) until it holds. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(100);
  }
}

/** Waits until every chart has drawn at least two time labels (a redraw on a loaded machine may lag). */
async function untilTimeLabels(page: Page, when: string): Promise<void> {
  await until(`${when}: every chart drew two time labels`, async () => {
    const counts = await page.$$eval("[data-x-ticks]", (boxes) =>
      boxes.map((box) => JSON.parse(box.getAttribute("data-x-ticks") ?? "[]").length as number),
    );
    return counts.length >= 7 && counts.every((n) => n >= 2);
  });
}

/** Every chart's time labels, once drawn: distinct, and at least 4 px apart. */
async function assertTimeLabelsApart(page: Page, when: string): Promise<void> {
  await untilTimeLabels(page, when);
  const charts = await page.$$eval("[data-testid=chart] [data-x-ticks]", (boxes) =>
    boxes.map((box) => JSON.parse(box.getAttribute("data-x-ticks") ?? "[]") as Tick[]),
  );
  assert.ok(charts.length >= 6, `${when}: every chart drew its axis`);
  for (const ticks of charts) {
    assert.ok(ticks.length >= 2, `${when}: a time axis has labels (${JSON.stringify(ticks)})`);
    assert.equal(
      new Set(ticks.map((t) => t[0])).size,
      ticks.length,
      `${when}: labels repeat: ${JSON.stringify(ticks)}`,
    );
    for (let i = 1; i < ticks.length; i++) {
      const gap = (ticks[i] as Tick)[1] - (ticks[i - 1] as Tick)[2];
      assert.ok(
        gap >= 4,
        `${when}: labels ${JSON.stringify(ticks[i - 1])} and ${JSON.stringify(ticks[i])} touch`,
      );
    }
  }
}

/** A chart's note on why it is empty (the pins chart's prices) sits below its plot, not over it. */
async function assertNoteBelowPlot(page: Page, when: string): Promise<void> {
  const boxes = await page.$$eval("[data-testid=chart]", (charts) =>
    charts.flatMap((chart) => {
      const note = chart.querySelector("[data-testid=chart-note]");
      const plot = chart.querySelector(".plot");
      if (!note || !plot) return [];
      return [{ noteTop: note.getBoundingClientRect().top, plotBottom: plot.getBoundingClientRect().bottom }];
    }),
  );
  assert.ok(boxes.length > 0, `${when}: the pins chart explains why it is empty`);
  for (const { noteTop, plotBottom } of boxes) {
    assert.ok(
      noteTop >= plotBottom,
      `${when}: a note at ${noteTop} px overlaps its plot (to ${plotBottom} px)`,
    );
  }
}

/** A port nothing listens on: the kernel's pick, released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

/** The legend of each chart, series by series: what it says without a mouse over it. */
async function legends(page: Page): Promise<Record<string, Record<string, string>>> {
  return page.$$eval("[data-testid=chart]", (charts) =>
    Object.fromEntries(
      charts.map((chart) => [
        chart.getAttribute("data-title"),
        Object.fromEntries(
          [...chart.querySelectorAll("[data-testid=legend] [data-series]")].map((item) => [
            item.getAttribute("data-series"),
            item.querySelector("b")?.textContent ?? "",
          ]),
        ),
      ]),
    ),
  );
}

const rows = (page: Page) =>
  page.$$eval("tr[data-program]", (trs) =>
    trs.map((tr) => ({
      id: tr.getAttribute("data-program") ?? "",
      state: tr.getAttribute("data-state") ?? "",
      kv: tr.getAttribute("data-kv") ?? "",
      kvText: tr.querySelector("td.kv")?.textContent ?? "",
      turns: Number(tr.querySelector("[data-testid=turns]")?.textContent),
    })),
  );

const KV_PLACES = new Set(["pool-running", "pool-pinned", "pool-reusable", "cpu", "disk", "gone"]);

describe("dashboard screenshots: idle, under load, after load (default flags, tiny model)", { skip }, () => {
  test("each state reads at a glance and is saved as a PNG", async () => {
    const wanted = process.env["CONTINUUM_SCREENSHOT_DIR"];
    const dir = wanted ? resolve(wanted) : await mkdtemp(join(tmpdir(), "continuum-dashboard-"));
    await mkdir(dir, { recursive: true });
    const s = await startLlamaServer([]);
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1400, height: 1000 });
      const errors: string[] = [];
      page.on("console", (message) => {
        if (message.type() === "error") errors.push(message.text());
      });
      page.on("pageerror", (error) => errors.push(String(error)));
      const url = s.server.url;
      await page.goto(`${url}/dashboard?poll=250`);

      // idle: empty charts say so, legends still show values
      await sleep(2200);
      await untilTimeLabels(page, "idle");
      const idle = await page.$$eval("[data-testid=chart]", (charts) =>
        charts.map((c) => [c.getAttribute("data-empty"), c.querySelector(".empty")?.textContent ?? ""]),
      );
      for (const [empty, text] of idle) {
        assert.equal(empty, "true");
        assert.match(text ?? "", /no data yet|idle|no program ended yet|no pins yet/);
      }
      for (const [title, items] of Object.entries(await legends(page))) {
        for (const [series, value] of Object.entries(items)) {
          assert.match(value, /^(0|no data)$/, `${title} / ${series} says ${value} when idle`);
        }
      }
      assert.ok(await page.$("[data-testid=no-programs]"), "the programs table says none came yet");
      await assertNoteBelowPlot(page, "idle");
      const instance = await page.$eval("[data-testid=instance]", (e) => e.textContent ?? "");
      assert.ok(
        instance.startsWith(`${new URL(url).host} · model `),
        `the header names the instance: ${instance}`,
      );
      await assertTimeLabelsApart(page, "idle");
      await page.screenshot({ path: join(dir, "dashboard-idle.png"), fullPage: true });

      // under load
      const load = Promise.all(
        Array.from({ length: AGENTS }, (_, n) => sleep(500 * n).then(() => agent(url, n))),
      );
      let during: Awaited<ReturnType<typeof rows>> = [];
      await until(
        "every program is listed and one waits between turns in the RAM tier",
        async () => {
          during = await rows(page);
          return during.length >= AGENTS && during.some((r) => r.state === "tool" && r.kv === "cpu");
        },
        60_000,
      );
      for (const row of during) {
        assert.ok(KV_PLACES.has(row.kv), `${row.id}: KV place ${row.kv}`);
        assert.ok(row.kvText.length > 0, `${row.id} says where its KV is`);
      }
      const betweenTurns = during.find((r) => r.state === "tool" && r.kv === "cpu");
      assert.match(
        betweenTurns?.kvText ?? "",
        /RAM tier · \d+ tok · [\d.]+ (KiB|MiB)/,
        "a program between turns waits in the RAM tier, with its size",
      );
      const table = await page.$eval("[data-testid=programs]", (t) => t.getBoundingClientRect().top);
      assert.ok(table < 1000 - 100, `the programs table starts above the fold (${table} px)`);
      await until("the token throughput chart has data", async () =>
        page.$eval(
          '[data-testid=chart][data-title="Tokens / s"]',
          (c) => c.getAttribute("data-empty") === "false",
        ),
      );
      const loaded = await legends(page);
      for (const title of ["Tokens / s", "Queue (requests)", "Latency (s), requests of the last 30 s"]) {
        for (const [series, value] of Object.entries(loaded[title] ?? {})) {
          assert.match(
            value,
            /^\d+(\.\d+)?(k|M| s)?$/,
            `${title} / ${series} shows a current value, not ${value}`,
          );
        }
      }
      await assertTimeLabelsApart(page, "under load");
      await page.screenshot({ path: join(dir, "dashboard-load.png"), fullPage: true });

      // the fleet page of a cluster fronting this server and a replica that is gone, under the same load
      const gone = `http://127.0.0.1:${await closedPort()}`;
      const fleet = await startSupervisorServer(
        () => [
          { name: "r1", url, started: false, pid: null, restarts: 0, exited: null },
          { name: "r2", url: gone, started: false, pid: null, restarts: 0, exited: null },
        ],
        join(dir, "unused-streams.sock"),
      );
      try {
        const fleetPage = await browser.newPage();
        await fleetPage.setViewport({ width: 1400, height: 700 });
        await fleetPage.goto(`http://127.0.0.1:${fleet.port}/dashboard?poll=250`);
        await fleetPage.waitForSelector('#replicas tr[data-replica="r2"] td[data-state="down"]');
        await fleetPage.waitForSelector("#program-rows tr[data-program]");
        const pool = await fleetPage.$eval(
          '#replicas tr[data-replica="r1"] [data-testid=pool-numbers]',
          (e) => e.textContent ?? "",
        );
        assert.match(pool, /^\S+ run · \S+ pinned · \S+ cached · \S+ free of \S+$/, "the pool in numbers");
        await fleetPage.screenshot({ path: join(dir, "dashboard-fleet.png"), fullPage: true });
        await fleetPage.close();
      } finally {
        await fleet.close();
      }

      // after load: every program finished with all its turns, pins as the policy made them
      await load;
      await until(
        "every program is listed as finished",
        async () =>
          (await rows(page)).every((r) => r.state === "finished") && (await rows(page)).length === AGENTS,
      );
      const after = await rows(page);
      assert.deepEqual(
        after.map((r) => [r.id, r.turns]).sort(),
        Array.from({ length: AGENTS }, (_, n) => [`agent-${n}`, TURNS]),
        "a finished 10-turn program shows 10 turns",
      );
      for (const row of after)
        assert.ok(KV_PLACES.has(row.kv) && row.kvText.length > 0, `${row.id}: ${row.kvText}`);
      const metrics = await s.metrics();
      await sleep(600);
      assert.equal(
        Number(await page.$eval("[data-testid=pins-created]", (b) => b.textContent)),
        metrics["continuum:pins_created_total"],
        "the page counts the pins the policy made",
      );
      const jct = await page.$eval('[data-testid=histogram][data-title="Program JCT"]', (h) =>
        h.getAttribute("data-count"),
      );
      assert.equal(Number(jct), AGENTS);
      const reasons = await page.$$eval("[data-reason]", (els) =>
        els.reduce((n, el) => n + Number(el.getAttribute("data-count")), 0),
      );
      assert.equal(reasons, AGENTS * TURNS);
      await assertTimeLabelsApart(page, "after load");
      await assertNoteBelowPlot(page, "after load");
      await page.screenshot({ path: join(dir, "dashboard-after.png"), fullPage: true });
      assert.deepEqual(errors, []);

      // an hour of history (with a two-minute outage): labels stay apart at every window
      const state = (await (await fetch(`${url}/dashboard/state`)).json()) as {
        history: { timeS: number }[];
      };
      const template = state.history.at(-1) as { timeS: number };
      const endS = Math.floor(Date.now() / 1000);
      const hour = Array.from({ length: 3600 }, (_, i) => ({
        ...template,
        timeS: endS - 3600 + i,
        running: i % 7,
      })).filter((p) => p.timeS < endS - 1800 || p.timeS > endS - 1680);
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        if (!request.url().includes("/dashboard/state")) return void request.continue();
        const since = Number(new URL(request.url()).searchParams.get("since") ?? 0);
        void request.respond({
          contentType: "application/json",
          body: JSON.stringify({ ...state, history: hour.filter((p) => p.timeS > since) }),
        });
      });
      await page.reload();
      for (const window of ["1 h", "15 min", "5 min"]) {
        await page.waitForSelector(".windows button");
        await page.$$eval(
          ".windows button",
          (buttons, label) => {
            for (const b of buttons) if (b.textContent === label) (b as unknown as { click(): void }).click();
          },
          window,
        );
        await sleep(400);
        await assertTimeLabelsApart(page, `history, ${window}`);
        const queue = (await legends(page))["Queue (requests)"] ?? {};
        assert.equal(queue["running"], String(3599 % 7), `${window}: the legend shows the latest value`);
      }
      // the pictures of a passing run are only kept where they were asked for
      if (!wanted) await rm(dir, { recursive: true, force: true });
    } finally {
      await browser.close();
      await s.close();
    }
  });
});
