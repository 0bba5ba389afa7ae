/**
 * `continuum cluster --replicas 2` routes a program's turns by the same table `continuum serve` reads its
 * program from (src/server/programs/program-identity.ts): Claude Code's Messages turns, named by its session header
 * alone, all land on one replica and find their KV there; and a program named by any source, on any API
 * that source is read on, runs every turn on one replica.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { llamaSkip } from "../engine/test-support/llama-skip.js";
import {
  PROGRAM_API_PATHS,
  PROGRAM_ID_SOURCES,
  type ProgramApi,
  type ProgramIdSource,
} from "../server/programs/program-identity.js";
import { haproxyMissing } from "./cluster.js";
import type { FleetState } from "./fleet.js";
import {
  type CliProcess,
  runContinuum,
  TINY_SERVE_FLAGS,
  waitForReplicasUp,
} from "./test-support/cluster-cli.js";

const skip = llamaSkip || haproxyMissing("haproxy") || false;
const PORT = 29000 + (process.pid % 300) * 16;
const MODEL = "continuum-tiny";

/** A conversation of `turn` earlier exchanges, as chat or Messages messages. */
function messages(task: string, turn: number): { role: string; content: string }[] {
  const out = [
    { role: "user", content: `${task}: read the failing test, find the module it imports, and fix the bug.` },
  ];
  for (let t = 0; t < turn; t++) {
    out.push({ role: "assistant", content: `Step ${t}: ran the tests.` });
    out.push({ role: "user", content: `Output of step ${t}: 1 failed. Go on.` });
  }
  return out;
}

/** The body of turn `turn` of a program on `api` (its program named elsewhere). */
function turnBody(api: ProgramApi, task: string, turn: number): Record<string, unknown> {
  switch (api) {
    case "chat":
      return { model: MODEL, messages: messages(task, turn), max_tokens: 4, temperature: 0 };
    case "completions":
      return { model: MODEL, prompt: JSON.stringify(messages(task, turn)), max_tokens: 4, temperature: 0 };
    case "messages":
      return { model: MODEL, messages: messages(task, turn), max_tokens: 4, temperature: 0 };
    case "responses":
      return { model: MODEL, input: messages(task, turn), max_output_tokens: 4, store: false };
  }
}

/** `body` and `headers` with the program `id` put where `source` reads it (and nowhere else). */
function named(source: ProgramIdSource, id: string, body: Record<string, unknown>) {
  if ("header" in source.at) return { body, headers: { [source.at.header]: id } };
  const value =
    source.form === "claude-user-id" ? JSON.stringify({ device_id: "dev-1", session_id: id }) : id;
  const [key, ...rest] = source.at.body as [string, ...string[]];
  const nested = rest.reduceRight<unknown>((inner, k) => ({ [k]: inner }), value);
  return { body: { ...body, [key]: nested }, headers: {} };
}

async function post(url: string, body: object, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Turns finished per program on each replica, from the replicas' own dashboards. */
async function turnsByReplica(url: string): Promise<Map<string, Map<string, number>>> {
  const fleet = (await (await fetch(`${url}/dashboard/state`)).json()) as FleetState;
  const out = new Map<string, Map<string, number>>();
  for (const replica of fleet.replicas) {
    const state = (await (await fetch(`${replica.url}/dashboard/state`)).json()) as {
      programs: { id: string; turns: number }[];
    };
    for (const program of state.programs) {
      const on = out.get(program.id) ?? new Map<string, number>();
      on.set(replica.name, (on.get(replica.name) ?? 0) + program.turns);
      out.set(program.id, on);
    }
  }
  return out;
}

describe("continuum cluster --replicas 2: a program's turns on one replica, whatever names it", {
  skip,
}, () => {
  let dir = "";
  let cluster: CliProcess;
  const url = `http://127.0.0.1:${PORT}`;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    cluster = runContinuum([
      "cluster",
      "--replicas",
      "2",
      "--port",
      String(PORT),
      "--config-dir",
      dir,
      ...TINY_SERVE_FLAGS,
    ]);
    await cluster.waitFor(/^ {2}fleet view: /, 120_000);
    await waitForReplicasUp(url, 2, 120_000);
  });
  after(async () => {
    cluster.kill();
    await cluster.exited;
    await rm(dir, { recursive: true, force: true });
  });

  test("Claude Code's Messages turns (its session header alone, no job_id) all land on one replica and reuse their KV", async () => {
    const sessions = [0, 1, 2, 3].map((s) => `claude-session-${PORT}-${s}`);
    const TURNS = 4;
    // one request at a time, as an idle cluster sees a session's turns: balanced by load, they would alternate
    const cached: number[][] = [];
    for (const session of sessions) {
      const reused: number[] = [];
      for (let t = 0; t < TURNS; t++) {
        const reply = await post(`${url}/v1/messages`, turnBody("messages", session, t), {
          "x-claude-code-session-id": session,
          "anthropic-version": "2023-06-01",
        });
        reused.push((reply["usage"] as { cache_read_input_tokens: number }).cache_read_input_tokens);
      }
      cached.push(reused);
    }
    const turns = await turnsByReplica(url);
    for (const [s, session] of sessions.entries()) {
      assert.deepEqual(
        [...(turns.get(session) ?? new Map()).values()],
        [TURNS],
        `${session}: ${TURNS} turns on one replica`,
      );
      for (let t = 1; t < TURNS; t++) assert.ok(cached[s]![t]! > 0, `${session} turn ${t + 1} found its KV`);
    }
  });

  test("programs named by any source serve reads, on every API it is read on, run all their turns on one replica", async () => {
    const TURNS = 4;
    const PER_SOURCE = 4;
    const programs = PROGRAM_ID_SOURCES.flatMap((source) =>
      source.apis.flatMap((api) =>
        Array.from({ length: PER_SOURCE }, (_, k) => ({
          source,
          api,
          task: `${source.name}@${api}-${k}-${PORT}`.replace(/[^\w@.-]/g, "-"),
        })),
      ),
    );
    const ids = await Promise.all(
      programs.map(async ({ source, api, task }) => {
        // a conversation's id is the Conversations API's: created first (on either replica)
        const id =
          source.form === "conversation"
            ? ((await post(`${url}/v1/conversations`, {}))["id"] as string)
            : task;
        for (let t = 0; t < TURNS; t++) {
          // a conversation holds the turns before: each request adds one
          const request = named(source, id, turnBody(api, task, source.form === "conversation" ? 0 : t));
          await post(`${url}${PROGRAM_API_PATHS[api]}`, request.body, request.headers);
        }
        return id;
      }),
    );
    const turns = await turnsByReplica(url);
    const split = programs.flatMap(({ source, api }, i) => {
      const on = turns.get(ids[i]!) ?? new Map<string, number>();
      const counts = [...on.values()];
      return counts.length === 1 && counts[0] === TURNS
        ? []
        : [`${source.name} on ${api}: ${JSON.stringify(Object.fromEntries(on))}`];
    });
    assert.deepEqual(split, [], `programs whose ${TURNS} turns were not all on one replica`);
  });
});
