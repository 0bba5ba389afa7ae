import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { chromiumSkip, launchChromium } from "../server/test-support/headless-chromium.js";
import { type Json, withServer } from "../server/test-support/test-server.js";
import type { FleetReplica } from "./fleet.js";
import { startSupervisorServer } from "./supervisor-server.js";

const NAME = "r 1/é";

const replica = (name: string, url: string): FleetReplica => ({
  name,
  url,
  started: false,
  pid: null,
  restarts: 0,
  exited: null,
});

describe("a replica's own dashboard through the supervisor: /replicas/<name>/dashboard", () => {
  test("its page, the files the page names and its state are the replica's, at paths under the balancer", async () => {
    await withServer({}, { apiKeys: ["sekrit"] }, async (t) => {
      const supervisor = await startSupervisorServer(
        () => [replica(NAME, t.url), replica("r2", "http://127.0.0.1:1")],
        join(tmpdir(), "continuum-unused-streams.sock"),
      );
      const base = `http://127.0.0.1:${supervisor.port}`;
      const pageUrl = `${base}/replicas/${encodeURIComponent(NAME)}/dashboard`;
      const auth = { Authorization: "Bearer sekrit" };
      try {
        const page = await fetch(pageUrl);
        assert.equal(page.status, 200);
        assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
        const html = await page.text();
        assert.equal(html, await (await fetch(`${t.url}/dashboard`)).text());

        // the browser resolves the page's references against the relayed page: every one is relayed too
        const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
        assert.ok(refs.length >= 3, "the page names its script, uPlot and its style");
        for (const ref of refs.filter((r) => !r.startsWith("data:"))) {
          const url = new URL(ref, pageUrl);
          assert.ok(url.pathname.startsWith("/replicas/r%201%2F%C3%A9/dashboard/assets/"), ref);
          const asset = await fetch(url);
          assert.equal(asset.status, 200, ref);
          assert.equal(asset.headers.get("cache-control"), "max-age=3600");
          const body = await asset.text();
          assert.equal(
            body,
            await (await fetch(`${t.url}/dashboard/assets/${ref.split("/").at(-1)}`)).text(),
          );
          if (ref.endsWith("app.js")) {
            const imports = [...body.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1] as string);
            assert.deepEqual(imports, ["./preact-htm.js"]);
            assert.equal((await fetch(new URL(imports[0] as string, url))).status, 200);
            assert.match(body, /const STATE_URL = `\$\{location\.pathname\}\/state`;/);
          }
        }

        // the state (at the page's path + /state), with the caller's key and query string
        const stateUrl = `${new URL(pageUrl).pathname}/state`;
        assert.equal((await fetch(`${base}${stateUrl}`)).status, 401, "the replica's refusal, relayed");
        const later = Date.now() / 1000 + 60;
        const state = await fetch(`${base}${stateUrl}?since=${later}`, { headers: auth });
        assert.equal(state.status, 200);
        assert.match(state.headers.get("content-type") ?? "", /^application\/json/);
        const body = (await state.json()) as Json;
        assert.equal(body.server.model, "fake-model");
        assert.equal(body.server.instance, `127.0.0.1:${t.server.port}`, "the replica's own address");
        assert.deepEqual(body.history, [], "the query string reached the replica");

        // only a known replica's dashboard is relayed
        const notFound = async (path: string, message: RegExp) => {
          const response = await fetch(`${base}${path}`, { headers: auth });
          assert.equal(response.status, 404, path);
          assert.match(((await response.json()) as Json).error.message, message);
        };
        await notFound("/replicas/r9/dashboard", /no replica "r9"/);
        await notFound("/replicas/r%201/dashboard", /no replica "r 1"/);
        await notFound(`/replicas/${encodeURIComponent(NAME)}/v1/models`, /not a replica's dashboard/);
        await notFound(
          `/replicas/${encodeURIComponent(NAME)}/dashboard/assets/a/b`,
          /not a replica's dashboard/,
        );
        await notFound("/replicas/%E0/dashboard", /not a replica's dashboard/);
        const down = await fetch(`${base}/replicas/r2/dashboard/state`);
        assert.equal(down.status, 502);
        assert.match(((await down.json()) as Json).error.message, /replica r2 did not answer/);
        const post = await fetch(pageUrl, { method: "POST" });
        assert.equal(post.status, 405);
        assert.equal(post.headers.get("allow"), "GET");
        assert.equal(((await post.json()) as Json).error.code, "method_not_allowed");
      } finally {
        await supervisor.close();
      }
    });
  });

  test("the fleet page's selector shows the chosen replica's dashboard, and a reload keeps the choice", {
    skip: chromiumSkip,
  }, async () => {
    await withServer({}, {}, async (t) => {
      const supervisor = await startSupervisorServer(
        () => [replica(NAME, t.url), replica("r2", "http://127.0.0.1:1")],
        join(tmpdir(), "continuum-unused-streams.sock"),
      );
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("pageerror", (error) => errors.push(String(error)));
        await page.goto(`http://127.0.0.1:${supervisor.port}/dashboard?poll=200`);
        await page.waitForSelector("#instance option:nth-child(3)");
        const options = await page.$$eval("#instance option", (os) => os.map((o) => o.textContent));
        assert.deepEqual(options, ["all", NAME, "r2"]);

        // the replica's header, inside the fleet page, names its own address and model
        const replicaHeader = async () => {
          const frame = await (await page.$("#replica-view"))?.contentFrame();
          assert.ok(frame, "the replica's dashboard is in the page");
          const header = await frame.waitForSelector("[data-testid=instance]");
          return header?.evaluate((e) => e.textContent);
        };
        await page.select("#instance", NAME);
        assert.equal(await replicaHeader(), `127.0.0.1:${t.server.port} · model fake-model`);
        assert.equal(await page.evaluate("location.search"), "?poll=200&replica=r+1%2F%C3%A9");
        assert.ok(await page.$eval("#fleet", (e) => e.hasAttribute("hidden")), "the fleet tables give way");

        await page.reload();
        assert.equal(await replicaHeader(), `127.0.0.1:${t.server.port} · model fake-model`);
        assert.equal(await page.evaluate('document.getElementById("instance").value'), NAME);

        await page.select("#instance", "");
        assert.equal(await page.evaluate("location.search"), "?poll=200");
        assert.ok(await page.$eval("#replica-view", (e) => e.hasAttribute("hidden")));
        await page.waitForSelector(`#replicas tr[data-replica="${NAME}"]`);
        assert.deepEqual(errors, []);
      } finally {
        await browser.close();
        await supervisor.close();
      }
    });
  });
});

/** A replica's /dashboard/state as the fleet page reads it: a pool, answers, and programs in each state. */
const REPLICA_STATE = {
  server: { model: "m", instance: "127.0.0.1:1" },
  pool: {
    blockSizeTokens: 16,
    totalBlocks: 1000,
    runningBlocks: 100,
    pinnedBlocks: 50,
    cachedBlocks: 200,
    freeBlocks: 650,
  },
  running: 1,
  waiting: 0,
  longestWaitS: 0,
  numPrograms: 3,
  answers: { success: 40, clientError: 2, rateLimited: 1, serverError: 0 },
  programs: [
    {
      id: "pinned-one",
      state: "pinned",
      pinTtlLeftS: 42.4,
      contextTokens: 800,
      turns: 3,
      ageS: 9,
      cachedShare: 0.5,
      kv: { poolTokens: 800, poolHolder: "pinned", tier: null, tierTokens: 0, tierBytes: 0 },
      finishedAgoS: null,
    },
    {
      id: "answered",
      state: "idle",
      pinTtlLeftS: null,
      contextTokens: 1200,
      turns: 2,
      ageS: 20,
      cachedShare: 0.6,
      kv: { poolTokens: 0, poolHolder: null, tier: "cpu", tierTokens: 1200, tierBytes: 512 * 1024 },
      finishedAgoS: null,
    },
    {
      id: "done",
      state: "finished",
      pinTtlLeftS: null,
      contextTokens: 300,
      turns: 4,
      ageS: 5,
      cachedShare: 0.7,
      kv: null,
      finishedAgoS: 3,
    },
  ],
  history: [{ timeS: 1, finishedPerS: 0.5, hitRatio: 0.6, ttftP50S: 0.05 }],
};

describe("the fleet page (/dashboard)", () => {
  test("shows why a replica is down, each one's pool in numbers and its errors, and each program's state, pin TTL and KV", {
    skip: chromiumSkip,
  }, async () => {
    const replicaServer = createServer((req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(req.url?.startsWith("/dashboard/state") ? JSON.stringify(REPLICA_STATE) : "{}");
    });
    await new Promise<void>((done) => replicaServer.listen(0, "127.0.0.1", done));
    const url = `http://127.0.0.1:${(replicaServer.address() as AddressInfo).port}`;
    // a port nothing listens on: the kernel's pick, released
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, "127.0.0.1", done));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((done) => closed.close(done));
    const supervisor = await startSupervisorServer(
      () => [replica("r1", url), replica("r2", `http://127.0.0.1:${deadPort}`)],
      join(tmpdir(), "continuum-unused-streams.sock"),
    );
    const browser = await launchChromium();
    try {
      const state = (await (
        await fetch(`http://127.0.0.1:${supervisor.port}/dashboard/state`)
      ).json()) as Json;
      assert.deepEqual(
        state.replicas.map((r: Json) => [r.name, r.up, r.ageS, r.error]),
        [
          ["r1", true, 0, null],
          ["r2", false, null, "connection refused"],
        ],
      );
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on("pageerror", (error) => errors.push(String(error)));
      await page.goto(`http://127.0.0.1:${supervisor.port}/dashboard?poll=200`);
      await page.waitForSelector('#program-rows tr[data-program="done"]');
      const replicaRow = (name: string) =>
        page.$eval(`#replicas tr[data-replica="${name}"]`, (tr) =>
          [...tr.querySelectorAll("td")].map((td) => td.textContent),
        );
      const [, , up, , , , , pool, , , , clientErrors, rateLimited, serverErrors] = await replicaRow("r1");
      assert.equal(up, "up, remote");
      assert.equal(pool, "1.6k run · 800 pinned · 3.2k cached · 10k free of 16k");
      assert.deepEqual([clientErrors, rateLimited, serverErrors], ["2", "1", "0"]);
      const [, , down] = await replicaRow("r2");
      assert.equal(down, "downconnection refused");
      const programs = await page.$$eval("#program-rows tr", (trs) =>
        trs.map((tr) => [...tr.querySelectorAll("td")].slice(1, 4).map((td) => td.textContent)),
      );
      assert.deepEqual(programs, [
        ["pinned-one", "pinned, TTL 42 s left", "pool, pinned · 800 tok"],
        ["answered", "idle, no tool call", "RAM tier · 1.2k tok · 512 KiB"],
        ["done", "finished 3.0 s ago", "gone"],
      ]);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
      await supervisor.close();
      await new Promise((done) => replicaServer.close(done));
    }
  });
});
