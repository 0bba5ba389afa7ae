/**
 * vLLM's published Grafana dashboard (test-support/vllm-grafana: its JSON as vLLM ships it) on `continuum
 * serve`'s /metrics: every series its panels query exists, labelled with the served model as its queries
 * select it, so that no panel stays empty.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { parsePrometheus } from "../test-support/prometheus-text.js";
import { withServer } from "../test-support/test-server.js";

interface Dashboard {
  readonly panels: readonly {
    readonly title: string;
    readonly targets: readonly { readonly expr: string }[];
  }[];
}

const dashboard = JSON.parse(
  readFileSync(new URL("../test-support/vllm-grafana/grafana.json", import.meta.url), "utf8"),
) as Dashboard;

/** The series a PromQL expression reads: every `vllm:` name in it. */
function seriesOf(expr: string): string[] {
  return [...expr.matchAll(/vllm:[a-zA-Z0-9_:]+/g)].map((m) => m[0]);
}

describe("vLLM's Grafana dashboard", () => {
  test("every series its 12 panels query is on /metrics, for the served model", async () => {
    await withServer({ reply: () => ["one ", "two ", "three"] }, {}, async (t) => {
      const chat = { model: "fake-model", messages: [{ role: "user", content: "hello there" }] };
      await (await t.post("/v1/chat/completions", chat)).json();
      await (await t.post("/v1/chat/completions", { ...chat, n: 2 })).json();
      const { samples } = parsePrometheus(await (await fetch(`${t.url}/metrics`)).text());

      assert.equal(dashboard.panels.length, 12);
      const missing: string[] = [];
      let queried = 0;
      for (const panel of dashboard.panels) {
        for (const series of panel.targets.flatMap((target) => seriesOf(target.expr))) {
          queried += 1;
          const found = samples.some((s) => s.name === series && s.labels["model_name"] === "fake-model");
          if (!found) missing.push(`${panel.title}: ${series}`);
        }
      }
      assert.ok(queried >= 30, `the panels query ${queried} series`);
      assert.deepEqual(missing, []);
    });
  });
});
