import { execFileSync, spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join } from "node:path";

/** The file that `name` would run from (a path, or looked up in $PATH); undefined when there is none. */
export function findExecutable(name: string): string | undefined {
  if (name.includes("/")) return isExecutableFile(name) ? name : undefined;
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir.length === 0) continue;
    const file = join(dir, name);
    if (isExecutableFile(file)) return file;
  }
  return undefined;
}

/** What a short command prints on stdout; undefined when it cannot start or fails. */
export function outputOf(command: string, args: readonly string[]): string | undefined {
  try {
    return execFileSync(command, args, {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 60_000,
    });
  } catch {
    return undefined;
  }
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** Runs a build tool with its output on our stderr (stdout stays for results). */
export function runStreaming(command: string, args: readonly string[], step: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", 2, 2] });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${step} failed (${command} ${signal ?? `exit ${code}`}): see its output above`));
    });
  });
}
