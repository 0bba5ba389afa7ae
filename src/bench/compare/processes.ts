/** The comparison's child processes: commands run to completion, and servers started, awaited and stopped. */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
/** Everything talks to this machine only. */
export const HOST = "127.0.0.1";

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

function waitExit(child: ChildProcess): Promise<Exit> {
  return new Promise((res) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      res({ code: child.exitCode, signal: child.signalCode });
      return;
    }
    child.once("exit", (code, signal) => res({ code, signal }));
  });
}

/** Runs a command to completion; stdout is returned, both streams also go to `logFile`. */
export async function runCommand(cmd: string, argv: readonly string[], logFile: string): Promise<string> {
  const child = spawn(cmd, argv, { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  const file = createWriteStream(logFile);
  file.write(`$ ${cmd} ${argv.join(" ")}\n`);
  let out = "";
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    file.write(d);
  });
  child.stderr!.on("data", (d: Buffer) => file.write(d));
  const exit = await waitExit(child);
  await new Promise<void>((r) => file.end(r));
  if (exit.code !== 0) {
    throw new Error(
      `${cmd} ${argv.slice(0, 4).join(" ")} ... failed (${exit.signal ?? exit.code}); see ${logFile}`,
    );
  }
  return out;
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once("error", rej);
    srv.listen(0, HOST, () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => res(port));
    });
  });
}

export interface Server {
  readonly name: string;
  readonly url: string;
  readonly child: ChildProcess;
  readonly logFile: string;
}

/** Starts a server process (its output to `<logDir>/server-<name>.log`) and waits until /v1/models answers. */
export async function startServer(
  name: string,
  cmd: string,
  argv: readonly string[],
  port: number,
  logDir: string,
): Promise<Server> {
  const logFile = join(logDir, `server-${name}.log`);
  const file = createWriteStream(logFile, { flags: "a" });
  file.write(`$ ${cmd} ${argv.join(" ")}\n`);
  const child = spawn(cmd, argv, { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout!.pipe(file);
  child.stderr!.pipe(file);
  const url = `http://${HOST}:${port}`;
  const deadline = performance.now() + 120_000;
  while (performance.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `${name} exited during start-up (${child.exitCode ?? child.signalCode}); see ${logFile}`,
      );
    }
    try {
      const r = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(2000) });
      if (r.ok) return { name, url, child, logFile };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  child.kill("SIGKILL");
  throw new Error(`${name} did not become ready in 120 s; see ${logFile}`);
}

export async function stopServer(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const exited = await Promise.race([
    waitExit(child).then(() => true),
    new Promise<boolean>((r) => setTimeout(() => r(false), 20_000)),
  ]);
  if (!exited) {
    child.kill("SIGKILL");
    await waitExit(child);
  }
}
