import { readFileSync } from "node:fs";
import { Command } from "commander";
import { formatTextTable } from "../../analysis/text-table.js";
import { analyzeSteps, readStepLog } from "../../bench/step-log-analysis.js";
import { loadEngineProfile } from "../../sim/hardware/engine-profile.js";

const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}x` : "-");

export function analyzeStepsCommand(): Command {
  return new Command("analyze-steps")
    .description(
      "price every step of a `serve --step-log` with a `continuum profile` and show, per step kind, where the real engine and the simulator's price part",
    )
    .argument("<log>", "a step log written by `continuum serve --step-log`")
    .requiredOption("--profile <file>", "the `continuum profile` JSON the simulator would use")
    .option("--json", "print the totals as JSON", false)
    .action((log: string, o: { profile: string; json: boolean }) => {
      const profile = loadEngineProfile(JSON.parse(readFileSync(o.profile, "utf8")));
      const totals = analyzeSteps(readStepLog(log), profile.latency);
      if (o.json) {
        process.stdout.write(`${JSON.stringify(totals, null, 2)}\n`);
        return;
      }
      const rows = totals.map((t) => [
        t.kind,
        String(t.steps),
        t.wallS.toFixed(2),
        t.computeS.toFixed(2),
        t.sampleS.toFixed(2),
        t.pricedRanS.toFixed(2),
        t.pricedPlannedS.toFixed(2),
        ratio(t.wallS, t.computeS),
        ratio(t.sampleS, t.computeS),
        ratio(t.computeS, t.pricedRanS),
        ratio(t.pricedRanS, t.pricedPlannedS),
        ratio(t.wallS, t.pricedPlannedS),
      ]);
      const head = [
        "steps",
        "n",
        "wall s",
        "compute s",
        "sampling s",
        "priced ran s",
        "priced plan s",
        "wall/compute",
        "sampling/compute",
        "compute/priced",
        "ran/plan",
        "wall/plan",
      ];
      process.stdout.write(`${formatTextTable(head, rows)}\n`);
    });
}
