import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { gatewayCommand, runGateway } from "./gateway-command.js";

describe("continuum gateway's command line", () => {
  it("refuses a policy whose KV falls to an offload tier (the backend's own), naming the ones it runs", async () => {
    const command = gatewayCommand()
      .exitOverride()
      .configureOutput({ writeErr: () => {} });
    await assert.rejects(
      command.parseAsync(["--backend", "http://127.0.0.1:1", "--scheduling-policy", "cachettl-offload"], {
        from: "user",
      }),
      /unknown policy "cachettl-offload" for a gateway; choose from vllm, program-fcfs,.*cachettl-adaptive/,
    );
  });

  it("needs a backend, and names a malformed one", async () => {
    const base = { schedulingPolicy: "vllm", host: "127.0.0.1", port: 0, servedModelName: [], apiKey: [] };
    await assert.rejects(
      runGateway({ ...base, backend: [] }, { handleSignals: false }),
      /give at least one --backend URL/,
    );
    await assert.rejects(
      runGateway({ ...base, backend: ["http://h:1?slots=2"] }, { handleSignals: false }),
      /unknown parameter slots/,
    );
  });
});
