import { Command } from "commander";

/**
 * Each command's module, loaded only when that command runs (a `continuum policies` need not load the
 * server, the engine and the simulator); help and an unknown command load them all, so every command is
 * listed and a misspelt one is named.
 */
const COMMANDS: readonly (readonly [string, () => Promise<Command>])[] = [
  ["serve", async () => (await import("./serving/serve-command.js")).serveCommand()],
  ["cluster", async () => (await import("./serving/cluster-command.js")).clusterCommand()],
  ["gateway", async () => (await import("./serving/gateway-command.js")).gatewayCommand()],
  ["profile", async () => (await import("./serving/profile-command.js")).profileCommand()],
  ["build-gpu", async () => (await import("./serving/build-gpu-command.js")).buildGpuCommand()],
  ["build-cpu", async () => (await import("./serving/build-cpu-command.js")).buildCpuCommand()],
  ["policies", async () => (await import("./simulation/policies-command.js")).policiesCommand()],
  ["simulate", async () => (await import("./simulation/simulate-command.js")).simulateCommand()],
  ["sweep", async () => (await import("./simulation/simulate-command.js")).sweepCommand()],
  ["capacity", async () => (await import("./simulation/capacity-command.js")).capacityCommand()],
  ["leave-one-out", async () => (await import("./simulation/leave-one-out-command.js")).leaveOneOutCommand()],
  ["trace", async () => (await import("./measurement/trace-command.js")).traceCommand()],
  ["step-time", async () => (await import("./simulation/step-time-command.js")).stepTimeCommand()],
  ["reproduce", async () => (await import("./simulation/reproduce-command.js")).reproduceCommand()],
  ["bench", async () => (await import("./measurement/bench-command.js")).benchCommand()],
  ["analyze", async () => (await import("./measurement/analyze-command.js")).analyzeCommand()],
  [
    "analyze-steps",
    async () => (await import("./measurement/analyze-steps-command.js")).analyzeStepsCommand(),
  ],
];

/** The `continuum` program with the commands `argv` may run: the one it names, or all of them. */
export async function continuumProgram(argv: readonly string[]): Promise<Command> {
  const named = COMMANDS.find(([name]) => name === argv[2]);
  const program = new Command("continuum")
    .description("Continuum: multi-turn LLM agent serving with KV-cache time-to-live (CacheTTL)")
    .showHelpAfterError()
    .enablePositionalOptions();
  for (const [, load] of named ? [named] : COMMANDS) program.addCommand(await load());
  return program;
}
