/** `continuum serve` over a FakeEngine, for the SIGTERM test: a child process that drains on the signal. */

import { FakeEngine } from "../../server/test-support/fake-engine.js";
import { runServe } from "../serve-command.js";

class LoggingFakeEngine extends FakeEngine {
  override async shutdown(): Promise<void> {
    await super.shutdown();
    process.stdout.write(`engine shutdown after ${this.finished.length} finished request(s)\n`);
  }
}

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
    drainTimeout: 30,
    logitBias: [],
    reasoningFormat: "auto",
    mediaInputs: "refuse",
  },
  { createEngine: () => engine },
);
