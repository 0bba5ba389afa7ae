/**
 * What a replayed program does between two turns: sleep the trace's tool time, or run a real,
 * harmless command in a sandbox directory (read-only listing, search, an empty Python process).
 */
import { execFile } from "node:child_process";
import { realpathSync, statSync } from "node:fs";

export interface ToolOutcome {
  readonly durationS: number;
  /** set when the command failed or timed out (the program carries on, as an agent would) */
  readonly error?: string;
}

export interface ToolRunner {
  /** Runs the turn's tool; rejects only when `signal` aborts (the run is being abandoned). */
  run(tool: string | null, toolS: number, signal: AbortSignal): Promise<ToolOutcome>;
}

export class AbandonedError extends Error {
  constructor() {
    super("abandoned: the drain timeout ended the run");
    this.name = "AbandonedError";
  }
}

/** Resolves after ms, or rejects with AbandonedError when signal aborts first. */
export function sleepMs(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbandonedError());
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbandonedError());
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Sleeps the trace's tool time (already scaled by --tool-time-scale). */
export class SleepTools implements ToolRunner {
  async run(_tool: string | null, toolS: number, signal: AbortSignal): Promise<ToolOutcome> {
    const start = performance.now();
    await sleepMs(toolS * 1000, signal);
    return { durationS: (performance.now() - start) / 1000 };
  }
}

/**
 * The command a tool name maps to. Every command reads only what lies under its working directory
 * (paths are "." or none; grep -r does not follow symlinks) and writes nothing.
 */
export function sandboxCommand(tool: string | null): { file: string; args: string[] } {
  const name = (tool ?? "").trim().toLowerCase();
  if (/python|pytest|pip|django|sympy/.test(name)) return { file: "python3", args: ["-c", "pass"] };
  if (/grep|search|find|rg|ack/.test(name))
    return { file: "grep", args: ["-rIl", "--max-count=1", "-e", "def", "."] };
  if (/cat|head|tail|open|view|read|edit|str_replace|create|write/.test(name))
    return { file: "ls", args: ["-laR", "."] };
  return { file: "ls", args: ["-la", "."] };
}

/** Runs sandboxCommand(tool) in `dir` with a timeout; its real duration is the tool time. */
export class SandboxTools implements ToolRunner {
  readonly dir: string;

  constructor(
    dir: string,
    private readonly timeoutS: number,
  ) {
    let resolved: string;
    try {
      resolved = realpathSync(dir);
    } catch {
      throw new Error(`--run-tools: ${dir} does not exist`);
    }
    if (!statSync(resolved).isDirectory()) throw new Error(`--run-tools: ${dir} is not a directory`);
    if (resolved === "/") throw new Error("--run-tools: refusing to run tools in /");
    this.dir = resolved;
  }

  run(tool: string | null, _toolS: number, signal: AbortSignal): Promise<ToolOutcome> {
    const { file, args } = sandboxCommand(tool);
    const start = performance.now();
    return new Promise<ToolOutcome>((resolve, reject) => {
      if (signal.aborted) {
        reject(new AbandonedError());
        return;
      }
      execFile(
        file,
        args,
        {
          cwd: this.dir,
          timeout: this.timeoutS * 1000,
          killSignal: "SIGKILL",
          maxBuffer: 4 * 1024 * 1024,
          signal,
          windowsHide: true,
        },
        (error) => {
          const durationS = (performance.now() - start) / 1000;
          if (signal.aborted) {
            reject(new AbandonedError());
            return;
          }
          // grep exits 1 when nothing matched: that is a result, not a failure
          const code = (error as { code?: unknown } | null)?.code;
          if (error && !(file === "grep" && code === 1)) {
            resolve({ durationS, error: `${file} ${args.join(" ")}: ${error.message.split("\n")[0]}` });
            return;
          }
          resolve({ durationS });
        },
      );
    });
  }
}
