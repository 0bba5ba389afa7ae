import { Command } from "commander";
import { analyzeCommand } from "./measurement/analyze-command.js";
import { analyzeStepsCommand } from "./measurement/analyze-steps-command.js";
import { benchCommand } from "./measurement/bench-command.js";
import { traceCommand } from "./measurement/trace-command.js";
import { buildCpuCommand } from "./serving/build-cpu-command.js";
import { buildGpuCommand } from "./serving/build-gpu-command.js";
import { clusterCommand } from "./serving/cluster-command.js";
import { gatewayCommand } from "./serving/gateway-command.js";
import { profileCommand } from "./serving/profile-command.js";
import { serveCommand } from "./serving/serve-command.js";
import { capacityCommand } from "./simulation/capacity-command.js";
import { leaveOneOutCommand } from "./simulation/leave-one-out-command.js";
import { policiesCommand } from "./simulation/policies-command.js";
import { reproduceCommand } from "./simulation/reproduce-command.js";
import { simulateCommand, sweepCommand } from "./simulation/simulate-command.js";
import { stepTimeCommand } from "./simulation/step-time-command.js";

const program = new Command("continuum")
  .description("Continuum: multi-turn LLM agent serving with KV-cache time-to-live (CacheTTL)")
  .showHelpAfterError()
  .enablePositionalOptions()
  .addCommand(serveCommand())
  .addCommand(clusterCommand())
  .addCommand(gatewayCommand())
  .addCommand(profileCommand())
  .addCommand(buildGpuCommand())
  .addCommand(buildCpuCommand())
  .addCommand(policiesCommand())
  .addCommand(simulateCommand())
  .addCommand(sweepCommand())
  .addCommand(capacityCommand())
  .addCommand(leaveOneOutCommand())
  .addCommand(traceCommand())
  .addCommand(stepTimeCommand())
  .addCommand(reproduceCommand())
  .addCommand(benchCommand())
  .addCommand(analyzeCommand())
  .addCommand(analyzeStepsCommand());

// `continuum policies | head`: a reader that stops early is not an error.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(0);
});

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`continuum: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
