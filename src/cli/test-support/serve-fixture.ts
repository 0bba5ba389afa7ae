/**
 * `continuum serve` over a FakeEngine, for the shutdown tests: a child process that drains on SIGTERM.
 * Flags: `--drain-timeout <s>` (default 30), `--exit-with-parent`.
 */

import { FakeEngine } from "../../server/test-support/fake-engine.js";
import { runServe } from "../serving/serve-command.js";

class LoggingFakeEngine extends FakeEngine {
  override async shutdown(): Promise<void> {
    await super.shutdown();
    process.stdout.write(`engine shutdown after ${this.finished.length} finished request(s)\n`);
  }
}

const argv = process.argv.slice(2);
const drainTimeoutAt = argv.indexOf("--drain-timeout");
const engine = new LoggingFakeEngine({ reply: () => ["one ", "two ", "three"], delayMs: 150 });
await runServe(
  {
    builtinModel: "tiny",
    schedulingPolicy: "cachettl",
    host: "127.0.0.1",
    port: 0,
    servedModelName: [],
    apiKey: [],
    flashAttn: true,
    drainTimeout: drainTimeoutAt < 0 ? 30 : Number(argv[drainTimeoutAt + 1]),
    exitWithParent: argv.includes("--exit-with-parent"),
    logitBias: [],
    reasoningFormat: "auto",
    mediaInputs: "refuse",
  },
  { createEngine: () => engine },
);
