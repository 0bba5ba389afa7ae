// Screenshot of a `continuum sweep` HTML report (its headline chart, ratios and KV panels), for
// docs/images/sweep-report.png. Usage: npm run build && node scripts/screenshot-report.mjs [out.png]
// (needs Debian's chromium; the sweep takes about a minute on two cores)
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const OUT = resolve(process.argv[2] ?? "docs/images/sweep-report.png");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const dir = mkdtempSync(join(tmpdir(), "continuum-report-"));
const report = join(dir, "sweep.html");

try {
  execFileSync(
    process.execPath,
    [
      "bin/continuum.js",
      "sweep",
      "--policies",
      "vllm,program-fcfs,cachettl,continuum-heuristic,cachettl-adaptive",
      "--jps",
      "0.02,0.04,0.06,0.08,0.1",
      "--programs",
      "150",
      "--seed",
      "1",
      "--report",
      report,
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1500 });
    await page.goto(pathToFileURL(report).href);
    // the charts, not the full table below them
    const chartsEnd = await page.evaluate(
      () => document.querySelector("#all-runs")?.getBoundingClientRect().top ?? 1500,
    );
    await page.screenshot({
      path: OUT,
      clip: { x: 0, y: 0, width: 1280, height: Math.min(1500, chartsEnd) },
    });
  } finally {
    await browser.close();
  }
  process.stderr.write(`wrote ${OUT}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
