/** Debian's chromium driven by puppeteer-core, for the dashboard tests (`CHROMIUM_PATH` overrides the path). */
import { existsSync } from "node:fs";
import puppeteer, { type Browser } from "puppeteer-core";

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";

/** A test's skip reason when there is no chromium (false when there is). */
export const chromiumSkip: string | false = existsSync(CHROMIUM)
  ? false
  : `no chromium at ${CHROMIUM} (apt-get install chromium)`;

/** A headless browser; close it in a finally. */
export function launchChromium(): Promise<Browser> {
  return puppeteer.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"], headless: true });
}
