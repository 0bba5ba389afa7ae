/**
 * The live dashboard in headless Chromium (Debian's `chromium` through puppeteer-core) against a server on
 * the built-in tiny model: the header names the device (the CPU), a program's row goes from running to
 * pinned to finished while the pool bar shows its KV, and the page logs no error. `continuum-heuristic` pins every tool-call turn for 2 s
 * without needing any history; the page polls every 100 ms so no state is missed.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "puppeteer-core";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { chromiumSkip, launchChromium } from "../../server/test-support/headless-chromium.js";
import { startLlamaServer } from "../test-support/llama-server.js";

const skip = llamaSkip || chromiumSkip;

const rowState = (page: Page, program: string) =>
  page.$eval(`tr[data-program="${program}"]`, (row) => row.getAttribute("data-state")).catch(() => null);

async function waitForState(page: Page, program: string, state: string): Promise<void> {
  await page.waitForSelector(`tr[data-program="${program}"][data-state="${state}"]`, { timeout: 15_000 });
}

describe("live dashboard in headless Chromium (real engine, tiny model)", { skip }, () => {
  test("the program's row and the pool bar follow it from running to pinned to finished", async () => {
    const s = await startLlamaServer(["--scheduling-policy", "continuum-heuristic"]);
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on("console", (message) => {
        if (message.type() === "error") errors.push(message.text());
      });
      page.on("pageerror", (error) => errors.push(String(error)));
      await page.goto(`${s.server.url}/dashboard?poll=100`);
      await page.waitForSelector("[data-testid=pool-bar]");
      assert.match(
        await page.$eval("header [data-testid=device]", (el) => el.textContent ?? ""),
        /^cpu · .+ · \d+\.\d GiB RAM · KV cache in RAM$/,
        "the header says the model runs on the CPU",
      );
      const blocks = (part: string) =>
        page.$eval(`[data-testid=pool-bar] [data-part=${part}]`, (el) =>
          Number(el.getAttribute("data-blocks")),
        );
      assert.equal(await blocks("running"), 0);

      const turn = (isLastStep: boolean, maxTokens: number) =>
        fetch(`${s.server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "Content-Type": "application/json", "X-Program-Id": "dash-1" },
          body: JSON.stringify({
            messages: [{ role: "user", content: "Run the tests and report." }],
            max_tokens: maxTokens,
            ignore_eos: true,
            is_last_step: isLastStep,
            this_func_call: isLastStep ? null : "pytest",
          }),
        }).then((r) => r.json());
      const first = turn(false, 1500);
      await waitForState(page, "dash-1", "running");
      assert.ok((await blocks("running")) > 0, "a running turn holds blocks of the pool");
      await first;
      await waitForState(page, "dash-1", "pinned");
      assert.match(
        await page.$eval('tr[data-program="dash-1"]', (row) => row.textContent ?? ""),
        /TTL \d/,
        "a pinned program shows its TTL",
      );
      const ttlLeftS = () =>
        page.$eval('tr[data-program="dash-1"] [data-testid=ttl]', (el) => {
          const m = /TTL ([\d.]+) (s|ms) left/.exec(el.textContent ?? "");
          return m ? Number(m[1]) / (m[2] === "ms" ? 1000 : 1) : Number.NaN;
        });
      const before = await ttlLeftS();
      await new Promise((resolve) => setTimeout(resolve, 400));
      assert.ok((await ttlLeftS()) < before, "the TTL counts down");
      await turn(true, 4);
      await waitForState(page, "dash-1", "finished");
      assert.equal(await rowState(page, "dash-1"), "finished");
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
      await s.close();
    }
  });
});
