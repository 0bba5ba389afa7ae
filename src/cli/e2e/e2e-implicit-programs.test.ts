/**
 * Clients that name no program (Qwen Code) still run as programs: a request whose messages repeat a reply
 * after the same messages is a turn of that reply's program, and a session's tool-less side request
 * (opencode's title) is no turn of it, even sent before the session's first turn with tools
 * (src/server/programs/turn-programs.ts). Seen
 * where an operator sees programs: `/dashboard/state`.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { llamaTemplate } from "../../server/test-support/llama-templates.js";
import { type LlamaServer, startLlamaServer } from "../test-support/llama-server.js";

const BLOCK = 16;
const TOOLS = [
  {
    type: "function",
    function: { name: "bash", parameters: { type: "object", properties: { cmd: { type: "string" } } } },
  },
];

interface Message {
  role: string;
  content: string;
}
interface Completion {
  choices: { message: { content: string | null } }[];
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details: { cached_tokens: number };
  };
}
interface DashboardProgram {
  id: string;
  turns: number;
}

function post(s: LlamaServer, body: object, headers: Record<string, string> = {}): Promise<Completion> {
  return fetch(`${s.server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify({ max_tokens: 24, temperature: 0, ...body }),
  }).then(async (r) => {
    assert.equal(r.status, 200, await r.clone().text());
    return (await r.json()) as Completion;
  });
}

async function programs(s: LlamaServer, headers: Record<string, string> = {}): Promise<DashboardProgram[]> {
  const state = (await (await fetch(`${s.server.url}/dashboard/state`, { headers })).json()) as {
    programs: DashboardProgram[];
  };
  return state.programs;
}

const conversation = (task: string): Message[] => [
  { role: "system", content: "You are a careful agent working in a repository. Answer with one command." },
  { role: "user", content: task },
];

/** One turn of an id-less agent: the reply and an observation go back into `messages`. */
async function agentTurn(s: LlamaServer, messages: Message[], turn: number, headers = {}) {
  const response = await post(s, { messages }, headers);
  messages.push({ role: "assistant", content: response.choices[0]?.message.content ?? "" });
  messages.push({ role: "user", content: `Observation ${turn}: 3 files changed, 1 test failed.` });
  return response.usage;
}

describe("programs of clients that send no program id (real engine, tiny model)", { skip: llamaSkip }, () => {
  test("id-less turns that each extend the previous prompt and reply are one program; an unrelated request is another", async () => {
    const s = await startLlamaServer(["--scheduling-policy", "cachettl", "--cpu-offload-gb", "0"]);
    try {
      const messages = conversation("List the files, then read the one that fails its test.");
      let previous: { prompt_tokens: number; completion_tokens: number } | null = null;
      for (let turn = 0; turn < 4; turn++) {
        const usage = await agentTurn(s, messages, turn);
        if (previous) {
          // a continued program's output is cache next turn too, but for the last block
          const reusable =
            Math.floor((previous.prompt_tokens + previous.completion_tokens - 1) / BLOCK) * BLOCK;
          assert.ok(
            usage.prompt_tokens_details.cached_tokens >= reusable,
            `turn ${turn}: ${JSON.stringify(usage)}`,
          );
        }
        previous = usage;
      }
      await post(s, { messages: conversation("Write a haiku about the sea, nothing else at all.") });
      const seen = await programs(s);
      assert.deepEqual(
        seen.map((p) => p.turns).sort(),
        [1, 4],
        `one program of 4 turns, one of 1: ${JSON.stringify(seen)}`,
      );
      for (const p of seen) assert.match(p.id, /^implicit-[0-9a-f]{16}$/);
    } finally {
      await s.close();
    }
  });

  test("streamed id-less turns, their replies assembled from the deltas and sent back, are one program", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const messages = conversation("Find the slow test and make it faster.");
      for (let turn = 0; turn < 3; turn++) {
        const response = await fetch(`${s.server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ messages, max_tokens: 24, temperature: 0, stream: true }),
        });
        let reply = "";
        for (const frame of (await response.text()).split("\n\n")) {
          const data = frame.startsWith("data: ") ? frame.slice("data: ".length) : "[DONE]";
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data) as { choices: { delta: { content?: string | null } }[] };
          reply += chunk.choices[0]?.delta.content ?? "";
        }
        messages.push({ role: "assistant", content: reply });
        messages.push({ role: "user", content: `Observation ${turn}: the test took 9 s.` });
      }
      assert.deepEqual(
        (await programs(s)).map((p) => p.turns),
        [3],
      );
    } finally {
      await s.close();
    }
  });

  test("a reply with a control token the stream left out still continues its program, that token's KV reused", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const messages = conversation("List the files, then read the one that fails its test.");
      // <s> (id 1) is a control token: a reply streams it as nothing, so the client cannot send it back
      const first = (await post(s, {
        messages,
        logit_bias: { "1": 7 },
        return_token_ids: true,
      })) as Completion & {
        choices: { token_ids: number[] }[];
      };
      const ids = first.choices[0]?.token_ids ?? [];
      const inner = ids.slice(0, -1);
      assert.ok(
        inner.includes(1) && inner.some((id) => id !== 1),
        `the tiny model no longer mixes <s> into its reply at this bias: ${JSON.stringify(ids)}`,
      );
      messages.push({ role: "assistant", content: first.choices[0]?.message.content ?? "" });
      messages.push({ role: "user", content: "Observation 0: 3 files changed, 1 test failed." });
      const usage = (await post(s, { messages })).usage;
      const reusable =
        Math.floor((first.usage.prompt_tokens + first.usage.completion_tokens - 1) / BLOCK) * BLOCK;
      assert.ok(usage.prompt_tokens_details.cached_tokens >= reusable, JSON.stringify(usage));
      assert.deepEqual(
        (await programs(s)).map((p) => p.turns),
        [2],
      );
    } finally {
      await s.close();
    }
  });

  test("a thinking template that drops the reply's thinking from the history: the next turn still joins its program", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-implicit-"));
    const template = join(dir, "minimax-m2.jinja");
    await writeFile(template, llamaTemplate("MiniMax-M2"));
    const s = await startLlamaServer(["--chat-template", template, "--cpu-offload-gb", "0"]);
    try {
      const messages = conversation("List the files, then read the one that fails its test.");
      const first = await post(s, { messages });
      // the generation prompt opens <think>: the reply is thinking, which the next prompt's history leaves out
      messages.push({ role: "assistant", content: first.choices[0]?.message.content ?? "" });
      messages.push({ role: "user", content: "Now the next file." });
      await post(s, { messages });
      assert.deepEqual(
        (await programs(s)).map((p) => p.turns),
        [2],
      );
    } finally {
      await s.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("two tenants never join each other's programs, even with the same conversation", async () => {
    const s = await startLlamaServer(["--api-key", "key-a", "--api-key", "key-b", "--cpu-offload-gb", "0"], {
      apiKey: "key-a",
    });
    try {
      const a = { Authorization: "Bearer key-a" };
      const b = { Authorization: "Bearer key-b" };
      const messages = conversation("Find the failing test in module 7 and fix it.");
      await agentTurn(s, messages, 0, a);
      // tenant B sends exactly what continues tenant A's program
      await post(s, { messages }, b);
      await agentTurn(s, messages, 1, a);
      assert.deepEqual(
        (await programs(s, a)).map((p) => p.turns),
        [2],
      );
      assert.deepEqual(
        (await programs(s, b)).map((p) => p.turns),
        [1],
      );
    } finally {
      await s.close();
    }
  });

  test("a session's request without tools (opencode's title request) is not a turn of the session", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const session = { "x-session-id": "ses_title" };
      const messages = conversation("Rename the config module and update its imports.");
      await post(s, { messages, tools: TOOLS }, session);
      await post(
        s,
        { messages: [{ role: "user", content: "Generate a title for this conversation." }], max_tokens: 8 },
        session,
      );
      messages.push({ role: "user", content: "Go on." });
      await post(s, { messages, tools: TOOLS }, session);
      const seen = await programs(s);
      assert.equal(seen.find((p) => p.id === "ses_title")?.turns, 2, JSON.stringify(seen));
    } finally {
      await s.close();
    }
  });

  test("a title request sent before the session's first turn with tools and still running when it comes is no turn", async () => {
    const s = await startLlamaServer(["--cpu-offload-gb", "0"]);
    try {
      const session = { "x-session-id": "ses_title_first" };
      const title = await fetch(`${s.server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...session },
        body: JSON.stringify({
          messages: [{ role: "user", content: "Generate a title for this conversation." }],
          max_tokens: 1500,
          ignore_eos: true,
          stream: true,
        }),
      });
      const reader = (title.body as ReadableStream<Uint8Array>).getReader();
      await reader.read(); // it runs
      const messages = conversation("Rename the config module and update its imports.");
      await post(s, { messages, tools: TOOLS }, session);
      while (!(await reader.read()).done) {}
      messages.push({ role: "user", content: "Go on." });
      await post(s, { messages, tools: TOOLS }, session);
      const seen = await programs(s);
      assert.equal(seen.find((p) => p.id === "ses_title_first")?.turns, 2, JSON.stringify(seen));
    } finally {
      await s.close();
    }
  });
});
