/** Tool calls over HTTP, and a program's turns through an agent framework's loop. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chat } from "../test-support/openai-requests.js";
import { type Json, sseEvents, withServer } from "../test-support/test-server.js";

describe("tool calls", () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather in a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];

  test("a Hermes call becomes tool_calls with finish_reason tool_calls; tools and results are in the prompt", async () => {
    const reply =
      'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    await withServer({ reply: () => reply }, {}, async (t) => {
      const messages = [
        { role: "system", content: "You are helpful." },
        { role: "user", content: "Weather in Oslo and Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "Oslo: 3C, rain" },
      ];
      const body = (await (await t.post("/v1/chat/completions", { messages, tools })).json()) as Json;
      const choice = body["choices"][0];
      assert.equal(choice.finish_reason, "tool_calls");
      assert.equal(choice.message.content, "Let me check.");
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assert.equal(call.type, "function");
      assert.match(call.id, /^call_/);
      assert.equal(call.function.name, "get_weather");
      assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });

      const prompt = t.engine.requests[0]!.prompt;
      assert.match(prompt, /<\|im_start\|>system\nYou are helpful\.\n\n# Tools\n/);
      assert.ok(prompt.includes('"name":"get_weather"'), "the tool list is rendered");
      assert.ok(
        prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city":"Oslo"}}\n</tool_call>'),
      );
      assert.ok(prompt.includes("<|im_start|>tool\nOslo: 3C, rain<|im_end|>"));
    });
  });

  test("streamed: content before the call streams, then the call: its name, then its arguments as they are generated", async () => {
    const pieces = [
      "Sure",
      ". <tool",
      '_call>{"name": "get_weather", ',
      '"arguments": {"ci',
      'ty": "Ro',
      'me"}}</tool_call>',
    ];
    await withServer({ reply: () => pieces }, {}, async (t) => {
      const raw = await (
        await t.post("/v1/chat/completions", { messages: chat().messages, tools, stream: true })
      ).text();
      const chunks = sseEvents(raw)
        .slice(0, -1)
        .map((e) => JSON.parse(e) as Json);
      const content = chunks.map((c) => c["choices"][0].delta.content ?? "").join("");
      assert.equal(content, "Sure. ");
      const calls = chunks.flatMap((c) => c["choices"][0].delta.tool_calls ?? []);
      assert.ok(calls.every((c: Json) => c.index === 0));
      assert.equal(calls[0].function.name, "get_weather", "the first delta names the function");
      assert.equal(calls[0].function.arguments, "");
      assert.ok(calls.length > 2, "arguments arrive in several deltas as they are generated");
      const args = calls.map((c: Json) => c.function.arguments).join("");
      assert.deepEqual(JSON.parse(args), { city: "Rome" });
      assert.equal(chunks.at(-1)!["choices"][0].finish_reason, "tool_calls");
    });
  });

  test("a single bash block becomes a call of the bash-like tool; tool_choice none leaves text alone", async () => {
    const bash = [
      {
        type: "function",
        function: {
          name: "bash",
          parameters: { type: "object", properties: { command: { type: "string" } } },
        },
      },
    ];
    const reply = "THOUGHT: look around\n\n```bash\ncd /testbed && ls -la\n```";
    await withServer({ reply: () => reply }, {}, async (t) => {
      const body = (await (await t.post("/v1/chat/completions", chat({ tools: bash }))).json()) as Json;
      const message = body["choices"][0].message;
      assert.equal(message.content, "THOUGHT: look around");
      assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), {
        command: "cd /testbed && ls -la",
      });
      const none = (await (
        await t.post("/v1/chat/completions", chat({ tools: bash, tool_choice: "none" }))
      ).json()) as Json;
      assert.equal(none["choices"][0].message.content, reply);
      assert.equal(none["choices"][0].finish_reason, "stop");
      // without tools nothing is parsed either
      const plain = (await (await t.post("/v1/chat/completions", chat())).json()) as Json;
      assert.equal(plain["choices"][0].message.tool_calls, undefined);
    });
  });

  test("tool_choice required forces a call grammar", async () => {
    await withServer(
      { reply: () => '<tool_call>\n{"name": "get_weather", "arguments": {"city": "X"}}\n</tool_call>' },
      {},
      async (t) => {
        await (await t.post("/v1/chat/completions", chat({ tools, tool_choice: "required" }))).json();
        const grammar = t.engine.requests[0]!.sampling.grammar ?? "";
        assert.match(grammar, /^root ::= "<tool_call>\\n"/);
        assert.ok(grammar.includes('\\"get_weather\\"'));
      },
    );
  });

  test("a call echoed back renders as the model wrote it: the next turn's prompt extends this turn's prompt and output", async () => {
    const output =
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": [1, 2]}}\n</tool_call>';
    await withServer({ reply: () => output }, {}, async (t) => {
      const first = [{ role: "user", content: "Weather in Oslo?" }];
      const answer = (await (
        await t.post("/v1/chat/completions", { messages: first, tools })
      ).json()) as Json;
      const message = answer["choices"][0].message;
      assert.equal(message.tool_calls[0].function.arguments, '{"city": "Oslo", "days": [1, 2]}');
      const result = { role: "tool", tool_call_id: message.tool_calls[0].id, content: "3C" };
      const next = await t.post("/v1/chat/completions", { messages: [...first, message, result], tools });
      await next.json();
      const [turn1, turn2] = t.engine.requests.map((r) => r.prompt);
      assert.ok(
        turn2!.startsWith(turn1! + output),
        `${JSON.stringify(turn1 + output)}\n${JSON.stringify(turn2)}`,
      );
    });
  });
});

describe("a program's turns through an agent framework's loop", () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "run_shell",
        description: "Run a shell command",
        parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
      },
    },
  ];
  const call = (id: string, command: string) => ({
    role: "assistant",
    content: null,
    tool_calls: [
      { id, type: "function", function: { name: "run_shell", arguments: JSON.stringify({ command }) } },
    ],
  });

  test("each turn's prompt extends the previous one, whatever its tool_choice (none included)", async () => {
    const replies = ["ls", "cat a.py", "pytest"].map(
      (command) => `<tool_call>\n{"name": "run_shell", "arguments": {"command": "${command}"}}\n</tool_call>`,
    );
    let turn = 0;
    await withServer({ reply: () => replies[turn++] ?? "All tests pass." }, {}, async (t) => {
      const messages: unknown[] = [{ role: "user", content: "Fix the failing test." }];
      const choices = ["auto", "required", { type: "function", function: { name: "run_shell" } }, "none"];
      for (const [i, tool_choice] of choices.entries()) {
        const response = await t.post("/v1/chat/completions", {
          messages,
          tools,
          tool_choice,
          job_id: "loop",
        });
        const body = (await response.json()) as Json;
        assert.equal(response.status, 200, JSON.stringify(body));
        if (i > 0) {
          const [previous, current] = t.engine.requests.slice(-2).map((r) => r.prompt);
          assert.ok(
            current!.startsWith(previous!),
            `turn ${i + 1} (${JSON.stringify(tool_choice)}) extends turn ${i}`,
          );
          assert.ok(body["usage"].prompt_tokens_details.cached_tokens > 0);
        }
        const message = body["choices"][0].message;
        if (tool_choice === "none") {
          assert.equal(message.content, "All tests pass.");
          assert.equal(message.tool_calls, undefined);
          break;
        }
        const id = message.tool_calls[0].id;
        messages.push(call(id, JSON.parse(message.tool_calls[0].function.arguments).command));
        messages.push({ role: "tool", tool_call_id: id, content: `output ${i}` });
      }
      assert.ok(
        t.engine.requests.at(-1)!.prompt.includes('"name": "run_shell"'),
        "the tools stay in the prompt",
      );
    });
  });

  test("a forced call cut off by max_tokens is a partial tool_calls entry with finish_reason length, never markup", async () => {
    const pieces = [
      "<tool_call>\n",
      '{"name": "run_',
      'shell", "arguments": ',
      '{"command": "ls -la ',
      "/src and more",
      " words",
    ];
    await withServer({ reply: () => pieces }, {}, async (t) => {
      const request = {
        messages: [{ role: "user", content: "List." }],
        tools,
        tool_choice: "required",
        max_tokens: 6,
      };
      const body = (await (await t.post("/v1/chat/completions", request)).json()) as Json;
      const choice = body["choices"][0];
      assert.equal(choice.finish_reason, "length");
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      assert.equal(choice.message.tool_calls[0].function.name, "run_shell");
      assert.equal(choice.message.tool_calls[0].function.arguments, '{"command": "ls -la ');

      const raw = await (await t.post("/v1/chat/completions", { ...request, stream: true })).text();
      const chunks = sseEvents(raw)
        .slice(0, -1)
        .map((e) => JSON.parse(e) as Json);
      const content = chunks.map((c) => c["choices"][0].delta.content ?? "").join("");
      assert.equal(content, "", "no markup streamed as content");
      const calls = chunks.flatMap((c) => c["choices"][0].delta.tool_calls ?? []);
      assert.equal(calls.map((c: Json) => c.function.name).join(""), "run_shell");
      assert.equal(calls.map((c: Json) => c.function.arguments).join(""), '{"command": "ls -la ');
      assert.equal(chunks.at(-1)!["choices"][0].finish_reason, "length");
    });
  });

  test("a call cut off before its name is complete takes the one offered tool it can be", async () => {
    await withServer({ reply: () => ["<tool_call>\n", '{"name": "run_', "sh"] }, {}, async (t) => {
      const request = {
        messages: [{ role: "user", content: "List." }],
        tools,
        tool_choice: "required",
        max_tokens: 2,
      };
      const body = (await (await t.post("/v1/chat/completions", request)).json()) as Json;
      assert.deepEqual(body["choices"][0].message.tool_calls[0].function, {
        name: "run_shell",
        arguments: "",
      });
    });
  });

  test("responses and chunks carry a system_fingerprint, the same for every request", async () => {
    await withServer({}, {}, async (t) => {
      const first = (await (await t.post("/v1/chat/completions", chat())).json()) as Json;
      assert.match(first["system_fingerprint"], /^fp_[0-9a-f]{10}$/);
      const raw = await (await t.post("/v1/chat/completions", chat({ stream: true }))).text();
      for (const event of sseEvents(raw).slice(0, -1)) {
        assert.equal((JSON.parse(event) as Json)["system_fingerprint"], first["system_fingerprint"]);
      }
      const text = (await (await t.post("/v1/completions", { prompt: "Hi" })).json()) as Json;
      assert.equal(text["system_fingerprint"], first["system_fingerprint"]);
    });
  });
});
