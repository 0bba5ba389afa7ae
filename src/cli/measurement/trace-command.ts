import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { SingleBar } from "cli-progress";
import { Command } from "commander";
import type { AgentTrace } from "../../workload/agent-traces/agent-trace.js";
import {
  isAgentTraceSource,
  loadAgentTraces,
  serializeAgentTracesJsonl,
} from "../../workload/agent-traces/agent-trace-files.js";
import { agentTraceStats } from "../../workload/agent-traces/agent-trace-stats.js";
import { formatAgentTraceStats } from "../../workload/agent-traces/format-agent-trace-stats.js";
import { formatTraceStats } from "../../workload/format-trace-stats.js";
import { type RecordSkips, recordFileToTrace } from "../../workload/import/record-to-trace.js";
import { findTrajectoryFiles, importFoundTrajectory } from "../../workload/import/trajectory-files.js";
import { CHARS_PER_TOKEN } from "../../workload/tokens.js";
import { loadTrace, serializeTraceJsonl, type TraceProgram } from "../../workload/trace.js";
import { traceStats } from "../../workload/trace-stats.js";
import { positiveInt } from "../sim-options.js";

function requireFile(path: string): void {
  if (!existsSync(path)) throw new Error(`${path}: no such file`);
}

/** `1 file`, `2 files` */
const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/** The trace to `out`, or to stdout. */
async function writeTrace(programs: readonly TraceProgram[], out: string | undefined): Promise<void> {
  const text = serializeTraceJsonl(programs);
  if (out === undefined) process.stdout.write(text);
  else await writeFile(out, text);
}

/** `N programs, T turns, P prompt + O output tokens` */
function traceSummary(programs: readonly TraceProgram[]): string {
  const turns = programs.flatMap((p) => p.turns);
  const prompt = turns.reduce((sum, t) => sum + t.input, 0);
  const output = turns.reduce((sum, t) => sum + t.output, 0);
  return `${count(programs.length, "program")}, ${count(turns.length, "turn")}, ${prompt} prompt + ${output} output tokens`;
}

/** Every path exists and holds Weka or Mooncake traces. */
function allAgentTraceSources(paths: readonly string[]): boolean {
  return paths.every((path) => existsSync(path) && isAgentTraceSource(path));
}

/** `16 sessions, 1435 calls (1200 turns, 235 in 26 subagents), 9876543 input + 123456 output tokens, 765432 block ids` */
export function agentTraceSummary(traces: readonly AgentTrace[]): string {
  const s = agentTraceStats(traces);
  return `${count(s.sessions, "session")}, ${count(s.calls, "call")} (${count(s.turnsPerSession.total, "turn")}, ${s.subagents.callsInSubagents} in ${count(s.subagents.total, "subagent")}), ${s.inputTokensPerCall.total} input + ${s.outputTokensPerCall.total} output tokens, ${count(s.blockIds, "block id")}`;
}

/**
 * Weka traces (a file, or a directory of them) and Mooncake JSONL as Weka JSON Lines. A session with a bad
 * field is named on stderr with its path and the field and left out; the command fails when none is left.
 */
async function importAgentTraces(paths: string[], o: { out?: string; blockSize?: number }): Promise<void> {
  const load = loadAgentTraces(paths, o.blockSize === undefined ? {} : { mooncakeBlockSize: o.blockSize });
  for (const problem of load.problems) process.stderr.write(`# skipped ${problem}\n`);
  if (load.traces.length === 0)
    throw new Error(`no session imported (${count(load.problems.length, "problem")})`);
  const text = serializeAgentTracesJsonl(load.traces);
  if (o.out === undefined) process.stdout.write(text);
  else await writeFile(o.out, text);
  const unknown = Object.entries(agentTraceStats(load.traces).unknownFields);
  const notes = [
    load.problems.length === 0 ? "" : `; ${count(load.problems.length, "session")} skipped`,
    load.ignored.length === 0 ? "" : `; ${count(load.ignored.length, "other file")} ignored`,
    unknown.length === 0 ? "" : `; unknown fields kept: ${unknown.map(([f, n]) => `${f} (${n})`).join(", ")}`,
  ].join("");
  process.stderr.write(
    `# imported ${agentTraceSummary(load.traces)} from ${count(load.files.length, "file")}${notes}\n`,
  );
}

async function importTrajectories(
  paths: string[],
  o: { out?: string; source?: string; blockSize?: number },
): Promise<void> {
  if (allAgentTraceSources(paths)) return importAgentTraces(paths, o);
  const found = await findTrajectoryFiles(paths);
  if (found.length === 0)
    throw new Error(
      `no trajectory or session file (.traj, .traj.json, .json, .jsonl) in ${paths.join(", ")}`,
    );
  const options = o.source === undefined ? {} : { source: o.source };
  const bar =
    found.length > 1 && process.stderr.isTTY
      ? new SingleBar({ format: "importing [{bar}] {value}/{total} files", stream: process.stderr })
      : null;
  bar?.start(found.length, 0);
  const programs: TraceProgram[] = [];
  const problems: string[] = [];
  let ignored = 0;
  let converted = 0;
  let withoutResponse = 0;
  let withoutUsage = 0;
  for (const [i, file] of found.entries()) {
    let line: string;
    try {
      const imported = await importFoundTrajectory(file, options);
      if (imported === null) {
        ignored++;
        line = `${file.path}: no trajectory or session log, ignored`;
      } else {
        programs.push(...imported.programs);
        if (imported.programs.length > 0) converted++;
        withoutResponse += imported.sessionsWithoutResponse;
        withoutUsage += imported.responsesWithoutUsage;
        const made = imported.programs.map((p) => `program ${p.id}, ${count(p.turns.length, "turn")}`);
        if (imported.sessionsWithoutResponse > 0)
          made.push(`${count(imported.sessionsWithoutResponse, "session")} without a response left out`);
        if (imported.responsesWithoutUsage > 0)
          made.push(`${count(imported.responsesWithoutUsage, "response")} without usage left out`);
        line = `${file.path}: ${made.join("; ")}`;
      }
    } catch (error) {
      line = `skipped ${(error as Error).message}`;
      problems.push(line);
    }
    if (bar) bar.update(i + 1);
    else process.stderr.write(`# ${i + 1}/${found.length} ${line}\n`);
  }
  bar?.stop();
  if (bar) for (const problem of problems) process.stderr.write(`# ${problem}\n`);
  const notes = [
    problems.length === 0 ? "" : `; ${problems.length} skipped`,
    ignored === 0 ? "" : `; ${count(ignored, "other file")} ignored`,
    withoutResponse === 0
      ? ""
      : `; ${count(withoutResponse, "session")} without a response with usage left out`,
    withoutUsage === 0 ? "" : `; ${count(withoutUsage, "response")} without usage left out`,
  ].join("");
  if (programs.length === 0)
    throw new Error(`no trajectory converted (${count(found.length, "file")}${notes})`);
  await writeTrace(programs, o.out);
  process.stderr.write(
    `# imported ${traceSummary(programs)} from ${converted} of ${count(found.length, "file")}${notes}\n`,
  );
}

function describeSkips(s: RecordSkips): string[] {
  const lines: string[] = [];
  if (s.anonymousRequests > 0)
    lines.push(
      `${count(s.anonymousRequests, "request")} without a program id left out (each a program of its own)`,
    );
  if (s.abortedRequests > 0)
    lines.push(
      `${count(s.abortedRequests, "aborted request")} left out (their time counts as time between turns)`,
    );
  if (s.unfinishedPrograms > 0)
    lines.push(
      `${count(s.unfinishedPrograms, "program")} left out: a request never departed (the log ended first)`,
    );
  if (s.programsWithoutTurns > 0)
    lines.push(`${count(s.programsWithoutTurns, "program")} left out: every request was aborted`);
  if (s.sideRequests > 0)
    lines.push(
      `${count(s.sideRequests, "side request")} (titles, summaries beside a program's turns) left out`,
    );
  if (s.assumedReuse > 0)
    lines.push(
      `${count(s.assumedReuse, "turn")} without a recorded reusable prefix (a log from before it was recorded): cached assumes append-only conversations`,
    );
  if (s.overlappingTurns > 0)
    lines.push(`${count(s.overlappingTurns, "turn")} overlapped the program's next request: tool_s 0`);
  return lines;
}

async function convertRecord(record: string, o: { out?: string }): Promise<void> {
  requireFile(record);
  const { programs, skips } = await recordFileToTrace(record);
  const notes = describeSkips(skips);
  for (const note of notes) process.stderr.write(`# ${note}\n`);
  if (programs.length === 0) throw new Error(`${record}: no program converted`);
  await writeTrace(programs, o.out);
  process.stderr.write(
    `# converted ${traceSummary(programs)}; tool_s the client's time between turns (docs/workloads.md)\n`,
  );
}

async function printStats(
  path: string,
  o: { json: boolean; top: number; blockSize?: number },
): Promise<void> {
  requireFile(path);
  if (isAgentTraceSource(path)) {
    const load = loadAgentTraces([path], o.blockSize === undefined ? {} : { mooncakeBlockSize: o.blockSize });
    for (const problem of load.problems) process.stderr.write(`# skipped ${problem}\n`);
    if (load.traces.length === 0) throw new Error(`${path}: no session in the trace`);
    const stats = agentTraceStats(load.traces);
    process.stdout.write(
      o.json ? `${JSON.stringify(stats, null, 2)}\n` : `# ${path}\n${formatAgentTraceStats(stats)}\n`,
    );
    return;
  }
  const programs = await loadTrace(path);
  if (programs.length === 0) throw new Error(`${path}: no program in the trace`);
  const stats = traceStats(programs);
  process.stdout.write(
    o.json ? `${JSON.stringify(stats, null, 2)}\n` : `# ${path}\n${formatTraceStats(stats, o.top)}\n`,
  );
}

export function traceCommand(): Command {
  const importCommand = new Command("import")
    .description(
      `Weka session traces (AgentX's Claude Code corpora; a file or a directory) and Mooncake JSONL as Weka JSON Lines, keeping block ids and subagents; or SWE-agent .traj and mini-swe-agent .traj.json trajectories (token counts estimated at ${CHARS_PER_TOKEN} characters per token), Claude Code, Codex and Qwen Code session logs and opencode exports (\`opencode export <session-id>\`; their recorded token counts) as a trace, one program per trajectory or session`,
    )
    .argument(
      "<paths...>",
      "trajectory or session files, or directories searched for .traj, .traj.json, other JSON and .jsonl (e.g. ~/.claude/projects, ~/.codex/sessions, ~/.qwen/projects)",
    )
    .option("-o, --out <file.jsonl>", "write the trace here instead of stdout")
    .option("--source <label>", "every program's `source` (default: the agent and its version)")
    .option("--block-size <tokens>", "tokens per hash id of Mooncake JSONL (default 512)", positiveInt)
    .action(importTrajectories);
  const fromRecordCommand = new Command("from-record")
    .description(
      "a `serve --record` or `simulate --record` event log as a trace: each program's requests as its turns",
    )
    .argument("<record.jsonl>", "scheduler event log")
    .option("-o, --out <file.jsonl>", "write the trace here instead of stdout")
    .action(convertRecord);
  const statsCommand = new Command("stats")
    .description(
      "the shape of a trace: turns, tokens, tool times per tool, reusable share; of a Weka or Mooncake trace: sessions, turns, subagents, tokens, theoretical prefix hit",
    )
    .argument("<trace>", "trace file, or a directory of Weka traces")
    .option("--top <n>", "tools listed, most called first", positiveInt, 10)
    .option("--json", "print every statistic as JSON on stdout", false)
    .option("--block-size <tokens>", "tokens per hash id of Mooncake JSONL (default 512)", positiveInt)
    .action(printStats);
  return new Command("trace")
    .description(
      "agent traces for `--trace`: import trajectories, convert a recorded event log, print a trace's statistics (docs/workloads.md)",
    )
    .addCommand(importCommand)
    .addCommand(fromRecordCommand)
    .addCommand(statsCommand);
}
