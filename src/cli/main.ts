import { Command } from "commander";
import { analyzeCommand } from "./analyze-command.js";
import { analyzeStepsCommand } from "./analyze-steps-command.js";
import { benchCommand } from "./bench-command.js";
import { buildGpuCommand } from "./build-gpu-command.js";
import { capacityCommand } from "./capacity-command.js";
import { clusterCommand } from "./cluster-command.js";
import { gatewayCommand } from "./gateway-command.js";
import { leaveOneOutCommand } from "./leave-one-out-command.js";
import { policiesCommand } from "./policies-command.js";
import { profileCommand } from "./profile-command.js";
import { reproduceCommand } from "./reproduce-command.js";
import { serveCommand } from "./serve-command.js";
import { simulateCommand, sweepCommand } from "./simulate-command.js";
import { stepTimeCommand } from "./step-time-command.js";
import { traceCommand } from "./trace-command.js";

const program = new Command("continuum")
  .description("Continuum: multi-turn LLM agent serving with KV-cache time-to-live (CacheTTL)")
  .showHelpAfterError()
  .enablePositionalOptions()
  .addCommand(serveCommand())
  .addCommand(clusterCommand())
  .addCommand(gatewayCommand())
  .addCommand(profileCommand())
  .addCommand(buildGpuCommand())
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
