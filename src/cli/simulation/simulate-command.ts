import { Command, Option } from "commander";
import {
  addClosedLoopOptions,
  addSimOptions,
  jobsFor,
  numberList,
  positiveNumber,
  type SimCliOptions,
} from "../sim-options.js";
import { refuseSessionTraceWithoutConcurrency, simulateClosedLoopAndPrint } from "./closed-loop-output.js";
import { runAndPrint } from "./sim-output.js";

export function simulateCommand(): Command {
  const command = new Command("simulate")
    .description("simulate one load point for each policy on a GPU profile (same scheduler as the server)")
    .option("--jps <rate>", "program arrival rate (jobs per second, Poisson)", positiveNumber, 0.3)
    .addOption(
      new Option(
        "--batch",
        "every program arrives at time 0 (batch inference, an RL rollout): judge by makespan and throughput",
      ).conflicts("jps"),
    );
  addSimOptions(command, { policies: "vllm,cachettl", programs: 100 });
  addClosedLoopOptions(
    command,
    "closed-loop replay of --trace's session trees (AgentX): this many lanes, each drawing the next tree when its tree drains; policies default to vllm, vllm-offload, cachettl-adaptive, thunderagent, concur, mori",
  );
  return command.action(async (o: SimCliOptions & { jps: number }) => {
    if (o.concurrency !== undefined) return simulateClosedLoopAndPrint(o, command);
    refuseSessionTraceWithoutConcurrency(o);
    // a batch has no arrival rate: its points are labelled 0 jobs/s
    if (o.batch)
      await runAndPrint(o, jobsFor(o, [0]), `continuum simulate: a batch of ${o.programs} programs`);
    else await runAndPrint(o, jobsFor(o, [o.jps]), `continuum simulate: ${o.jps} jobs/s`);
  });
}

export function sweepCommand(): Command {
  const command = new Command("sweep")
    .description("simulate a sweep of loads x policies and report JCT vs load")
    .option(
      "--jps <list>",
      "comma-separated loads (jobs per second)",
      numberList,
      [0.05, 0.1, 0.2, 0.3, 0.4],
    );
  addSimOptions(command, { policies: "vllm,autellix,thunderagent,concur,cachettl", programs: 200 });
  return command.action(async (o: SimCliOptions & { jps: number[] }) => {
    refuseSessionTraceWithoutConcurrency(o);
    await runAndPrint(o, jobsFor(o, o.jps), "continuum sweep");
  });
}
