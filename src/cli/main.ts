import { continuumProgram } from "./program.js";

// `continuum policies | head`: a reader that stops early is not an error.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(0);
});

continuumProgram(process.argv)
  .then((program) => program.parseAsync(process.argv))
  .catch((error: unknown) => {
    process.stderr.write(`continuum: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
