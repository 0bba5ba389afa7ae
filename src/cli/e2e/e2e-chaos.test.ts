/**
 * Clients misbehaving together against the real engine (built-in tiny model): agent programs over the
 * Chat Completions (two choices at times), Messages and Responses APIs at once (chained responses and
 * conversations), streams dropped after a few events, background responses cancelled, programs and
 * conversations deleted between turns. Afterwards the server must
 * be idle with no KV held for a request, every pin gone with its program, and still answer. The KV pool's
 * invariants are property tests in core; this is the same promise where a user sees it, through HTTP.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Rng } from "../../core/rng.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { type LlamaServer, sleep, startLlamaServer } from "../test-support/llama-server.js";

const CLIENTS = 8;
const PROGRAMS_PER_CLIENT = 3;
const TURNS = 3;

interface PoolState {
  readonly running: number;
  readonly waiting: number;
  readonly numPrograms: number;
  readonly programs: readonly { readonly id: string }[];
  readonly pool: {
    readonly totalBlocks: number;
    readonly runningBlocks: number;
    readonly pinnedBlocks: number;
    readonly cachedBlocks: number;
    readonly freeBlocks: number;
  };
}

const TOOLS = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "run a shell command",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
];

/** Sends a request; a stream is read to its end, or dropped after `dropAfter` chunks. The HTTP status. */
async function send(url: string, body: Record<string, unknown>, dropAfter: number | null): Promise<number> {
  const controller = new AbortController();
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  if (!body["stream"]) {
    await response.arrayBuffer();
    return response.status;
  }
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  for (let chunks = 0; ; chunks++) {
    if (dropAfter !== null && chunks >= dropAfter) {
      controller.abort();
      return response.status;
    }
    if ((await reader.read()).done) return response.status;
  }
}

interface Tally {
  readonly statuses: number[];
  dropped: number;
  cancelled: number;
  deleted: number;
  /** responses on a conversation, and conversations deleted while their program went on */
  conversationTurns: number;
  conversationsDeleted: number;
}

async function program(s: LlamaServer, rng: Rng, id: string, tally: Tally): Promise<void> {
  const { statuses } = tally;
  const base = s.server.url;
  const api = rng.int(0, 3);
  const history: { role: string; content: string }[] = [];
  let previousResponse: string | undefined;
  let conversation: string | undefined;
  /** Creates a response to the last user message; its id. */
  const respond = async (fields: Record<string, unknown>): Promise<string> => {
    const response = await fetch(`${base}/v1/responses`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        model: s.model,
        input: history.at(-1)?.content,
        max_output_tokens: 12,
        ...fields,
      }),
    });
    statuses.push(response.status);
    return ((await response.json()) as { id: string }).id;
  };
  for (let turn = 0; turn < TURNS; turn++) {
    history.push({
      role: "user",
      content: `step ${turn} of task ${id}: ${"read the file and run the tests ".repeat(1 + rng.int(0, 5))}`,
    });
    const stream = rng.next() < 0.6;
    const dropAfter = stream && rng.next() < 0.4 ? rng.int(1, 4) : null;
    if (dropAfter !== null && api !== 2) tally.dropped++;
    const last = turn === TURNS - 1;
    if (api === 0) {
      statuses.push(
        await send(
          `${base}/v1/chat/completions`,
          {
            model: s.model,
            messages: history,
            max_tokens: 12,
            stream,
            tools: TOOLS,
            job_id: id,
            is_last_step: last,
            // sibling choices share the prompt's KV, and go when the client does
            n: rng.int(1, 2),
            logprobs: rng.next() < 0.3,
          },
          dropAfter,
        ),
      );
    } else if (api === 1) {
      statuses.push(
        await send(
          `${base}/v1/messages`,
          { model: s.model, system: "You are an agent.", messages: history, max_tokens: 12, stream },
          dropAfter,
        ),
      );
    } else if (api === 3) {
      if (conversation === undefined) {
        const created = await fetch(`${base}/v1/conversations`, { method: "POST" });
        statuses.push(created.status);
        conversation = ((await created.json()) as { id: string }).id;
      }
      const input = history.at(-1)?.content;
      const body = { model: s.model, input, max_output_tokens: 12, stream, conversation };
      statuses.push(await send(`${base}/v1/responses`, body, dropAfter));
      tally.conversationTurns++;
      if (rng.next() < 0.3) {
        const deleted = await fetch(`${base}/v1/conversations/${conversation}`, { method: "DELETE" });
        statuses.push(deleted.status);
        await deleted.arrayBuffer();
        tally.conversationsDeleted++;
        conversation = undefined;
      }
    } else if (rng.next() < 0.3) {
      const responseId = await respond({ background: true });
      const cancelled = await fetch(`${base}/v1/responses/${responseId}/cancel`, { method: "POST" });
      await cancelled.arrayBuffer();
      statuses.push(cancelled.status);
      tally.cancelled++;
    } else {
      previousResponse = await respond({ previous_response_id: previousResponse });
    }
    history.push({ role: "assistant", content: "running the tests" });
    if (rng.next() < 0.15) {
      const deleted = await fetch(`${base}/v1/programs/${id}`, { method: "DELETE" });
      await deleted.arrayBuffer();
      tally.deleted++;
    }
    await sleep(rng.int(0, 149));
  }
}

async function poolState(s: LlamaServer): Promise<PoolState> {
  return (await (await fetch(`${s.server.url}/dashboard/state`)).json()) as PoolState;
}

describe("misbehaving clients against the llama.cpp engine (tiny model)", { skip: llamaSkip }, () => {
  for (const tokenizer of ["spm", "bpe"] as const)
    test(`every API at once, streams dropped, background responses cancelled: idle afterwards, no KV held, still serving (${tokenizer} tokenizer)`, async () => {
      const model =
        tokenizer === "spm" ? [] : ["--model", await ensureBuiltinModel({ preset: "tiny", tokenizer })];
      const s = await startLlamaServer(["--kv-cache-tokens", "4096", ...model]);
      try {
        const rng = new Rng(2026);
        const tally: Tally = {
          statuses: [],
          dropped: 0,
          cancelled: 0,
          deleted: 0,
          conversationTurns: 0,
          conversationsDeleted: 0,
        };
        await Promise.all(
          Array.from({ length: CLIENTS }, async (_, client) => {
            const own = new Rng(rng.int(0, 2 ** 30));
            for (let p = 0; p < PROGRAMS_PER_CLIENT; p++)
              await program(s, own, `chaos-${client}-${p}`, tally);
          }),
        );
        assert.ok(
          tally.dropped >= 5 &&
            tally.cancelled >= 2 &&
            tally.deleted >= 2 &&
            tally.conversationTurns >= 6 &&
            tally.conversationsDeleted >= 1,
          JSON.stringify({ ...tally, statuses: tally.statuses.length }),
        );
        assert.deepEqual(
          tally.statuses.filter((status) => status !== 200),
          [],
          "every request was answered (a dropped stream counts by its status line)",
        );

        let state = await poolState(s);
        for (let i = 0; i < 100 && (state.running > 0 || state.waiting > 0); i++) {
          await sleep(100);
          state = await poolState(s);
        }
        assert.equal(state.running, 0);
        assert.equal(state.waiting, 0);
        assert.equal(state.pool.runningBlocks, 0, "no request still holds KV");
        const { totalBlocks, pinnedBlocks, cachedBlocks, freeBlocks } = state.pool;
        assert.equal(pinnedBlocks + cachedBlocks + freeBlocks, totalBlocks);

        for (const { id } of state.programs) {
          await (
            await fetch(`${s.server.url}/v1/programs/${encodeURIComponent(id)}`, { method: "DELETE" })
          ).arrayBuffer();
        }
        state = await poolState(s);
        assert.equal(state.pool.pinnedBlocks, 0, "a deleted program's pin is gone");
        assert.equal(state.numPrograms, 0);

        const after = await s.openai.chat.completions.create({
          model: s.model,
          messages: [{ role: "user", content: "are you still there?" }],
          max_tokens: 4,
        });
        assert.equal(after.choices[0]?.finish_reason, "length");
      } finally {
        await s.close();
      }
    });
});
