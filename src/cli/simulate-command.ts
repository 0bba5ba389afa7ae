import { Command } from "commander";
import { addSimOptions, jobsFor, numberList, positiveNumber, type SimCliOptions } from "./sim-options.js";
import { runAndPrint } from "./sim-output.js";

export function simulateCommand(): Command {
  const command = new Command("simulate")
    .description("simulate one load point for each policy on a GPU profile (same scheduler as the server)")
    .option("--jps <rate>", "program arrival rate (jobs per second, Poisson)", positiveNumber, 0.3);
  addSimOptions(command, { policies: "vllm,cachettl", programs: 100 });
  return command.action(async (o: SimCliOptions & { jps: number }) => {
    await runAndPrint(o, jobsFor(o, [o.jps]), `continuum simulate: ${o.jps} jobs/s`);
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
    await runAndPrint(o, jobsFor(o, o.jps), "continuum sweep");
  });
}
