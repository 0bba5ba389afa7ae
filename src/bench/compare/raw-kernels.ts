/** The raw kernels side by side: llama.cpp's llama-batched-bench against ours, row by row. */
import { join } from "node:path";
import type { BatchedBenchRow } from "../../profiler/batched-bench.js";
import { REPO_ROOT, runCommand } from "./processes.js";
import type { RawRow } from "./results.js";

// 128 decode steps a row: with 32, a row lasted 60-90 ms at one sequence and moved by 30% between rounds
const RAW_DECODE_STEPS = 128;

export interface RawKernelsOptions {
  readonly batchedBenchBin: string;
  /** llama-batched-bench's model, threads, KV size, batch sizes and flash attention (llama-server's own) */
  readonly llamaArgv: readonly string[];
  readonly modelPath: string;
  readonly threads: number;
  readonly kvTokens: number;
  /** interleaved rounds, best of each: the machine's speed drifts by tens of percent between runs */
  readonly rounds: number;
  /** where each run's log is written */
  readonly outDir: string;
}

/** Prefill and decode speed per row, each side from its faster KV layout (unified or per-sequence). */
export async function compareRawKernels(o: RawKernelsOptions): Promise<RawRow[]> {
  const raw: RawRow[] = [];
  const common = ["-npp", "512", "-ntg", String(RAW_DECODE_STEPS), "-npl", "1,4,16"];
  const llamaRows: { row: BatchedBenchRow; kvUnified: boolean }[] = [];
  const oursRows: { row: BatchedBenchRow; kvUnified: boolean }[] = [];
  for (let round = 0; round < o.rounds; round++) {
    for (const kvUnified of [false, true]) {
      const out = await runCommand(
        o.batchedBenchBin,
        [...o.llamaArgv, kvUnified ? "-kvu" : "-no-kvu", "--output-format", "jsonl", ...common],
        join(o.outDir, `llama-batched-bench${kvUnified ? "-kvu" : ""}-${round}.log`),
      );
      for (const line of out.split("\n")) {
        if (!line.startsWith("{")) continue;
        const j = JSON.parse(line) as Record<string, number>;
        llamaRows.push({
          kvUnified,
          row: {
            pp: j["pp"]!,
            tg: j["tg"]!,
            pl: j["pl"]!,
            nKv: j["n_kv"]!,
            tPp: j["t_pp"]!,
            speedPp: j["speed_pp"]!,
            tTg: j["t_tg"]!,
            speedTg: j["speed_tg"]!,
          },
        });
      }
    }
    for (const kvUnified of [true, false]) {
      const layout = kvUnified ? "unified" : "streams";
      const oursOut = await runCommand(
        process.execPath,
        [
          "--import",
          "tsx",
          join(REPO_ROOT, "src", "profiler", "batched-bench.ts"),
          "--model",
          o.modelPath,
          "--threads",
          String(o.threads),
          "--ctx",
          String(o.kvTokens),
          "--batch",
          "512",
          "--npp",
          "512",
          "--ntg",
          String(RAW_DECODE_STEPS),
          "--npl",
          "1,4,16",
          "--kv-layout",
          layout,
          "--json",
        ],
        join(o.outDir, `continuum-batched-bench-${layout}-${round}.log`),
      );
      for (const l of oursOut.split("\n"))
        if (l.startsWith("{")) oursRows.push({ kvUnified, row: JSON.parse(l) as BatchedBenchRow });
    }
  }
  const same = (x: BatchedBenchRow, y: BatchedBenchRow) => x.pp === y.pp && x.tg === y.tg && x.pl === y.pl;
  const bestOf = (rows: BatchedBenchRow[]) => ({
    speedPp: Math.max(...rows.map((r) => r.speedPp)),
    speedTg: Math.max(...rows.map((r) => r.speedTg)),
  });
  const layoutBest = (rows: typeof llamaRows, o: BatchedBenchRow, unified: boolean) => {
    const matching = rows.filter((r) => r.kvUnified === unified && same(r.row, o)).map((r) => r.row);
    return matching.length > 0 ? bestOf(matching) : null;
  };
  const ours = oursRows.map((x) => x.row).filter((o, i, all) => all.findIndex((x) => same(x, o)) === i);
  for (const o of ours) {
    const mine = bestOf(oursRows.filter((x) => same(x.row, o)).map((x) => x.row));
    const perSeq = layoutBest(llamaRows, o, false);
    const unified = layoutBest(llamaRows, o, true);
    const peers = [perSeq, unified].filter((x) => x !== null);
    if (peers.length === 0) continue;
    // the peer at its best per row: prefill and decode each from its faster KV layout
    raw.push({
      pp: o.pp,
      tg: o.tg,
      pl: o.pl,
      llama: {
        speedPp: Math.max(...peers.map((x) => x.speedPp)),
        speedTg: Math.max(...peers.map((x) => x.speedTg)),
        kvUnified: unified !== null && (perSeq === null || unified.speedTg > perSeq.speedTg),
      },
      llamaUnified: unified,
      ours: mine,
      oursUnified: layoutBest(oursRows, o, true),
    });
  }
  return raw;
}
