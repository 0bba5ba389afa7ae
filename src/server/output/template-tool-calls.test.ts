/**
 * Every real model's template in llama.cpp's test set: the calls a template writes into a conversation are
 * the calls the server reads back from a model that answers the way its template taught it. Templates
 * whose calls are not read say why; a new template in the pinned set must join one list or the other.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import type { ChatMessageInput, ToolInput } from "../schemas.js";
import { testTemplate } from "../test-support/chat-fixtures.js";
import { llamaTemplate, llamaTemplateNames, qwen3ChatTemplate } from "../test-support/llama-templates.js";
import {
  type Json,
  type StreamedChoice,
  sseEvents,
  streamedChoice,
  withServer,
} from "../test-support/test-server.js";
import { harmonyCalls } from "./harmony.js";
import { MessageStream, messagesIn, readMessageText } from "./output-messages.js";
import { type RecipientFormatName, recipientMessages } from "./recipient-formats.js";
import { detectToolCallFormat, parseToolCallsAs, type ToolCallFormat } from "./tool-call-formats.js";
import type { ToolSpec } from "./tool-calls.js";

const tools: ToolInput[] = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "Run a command",
      parameters: {
        type: "object",
        properties: {
          command: { type: "string", description: "The command" },
          timeout: { type: "integer", description: "Seconds" },
        },
        required: ["command"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file",
      parameters: {
        type: "object",
        properties: { path: { type: "string", description: "The file" } },
        required: ["path"],
      },
    },
  },
];
const specs: ToolSpec[] = tools.map((t) => ({
  name: t.function.name,
  parameters: t.function.parameters ?? null,
}));

const asked: ChatMessageInput[] = [
  { role: "system", content: "Fix the bug." },
  { role: "user", content: "List the files, then read a.py." },
];
const calls = [
  { name: "bash", args: { command: "ls -la", timeout: 30 } },
  { name: "read_file", args: { path: "a.py" } },
];
const answered = (made: typeof calls): ChatMessageInput[] => [
  ...asked,
  {
    role: "assistant",
    content: null,
    tool_calls: made.map((c, i) => ({
      id: `call${i}abcd`,
      type: "function" as const,
      function: { name: c.name, arguments: JSON.stringify(c.args) },
    })),
  },
];

/** Templates that refuse more than one call in a turn: they are given one. */
const ONE_CALL = [
  "GigaChat3-10B-A1.8B",
  "GigaChat3.1-10B-A1.8B",
  "meta-llama-Llama-3.1-8B-Instruct",
  "meta-llama-Llama-3.2-3B-Instruct",
  "meta-llama-Llama-3.3-70B-Instruct",
];

/** Templates whose calls the server does not read, and why. */
const NOT_READ: Record<string, string> = {
  "HuggingFaceTB-SmolLM3-3B": "writes no calls into the conversation",
  "LFM2-8B-A1B": "writes no calls into the conversation",
  "LFM2.5-Instruct": "writes no calls into the conversation",
  "ibm-granite-granite-3.3-2B-Instruct": "writes no calls into the conversation",
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": "writes no calls into the conversation",
  "fireworks-ai-llama-3-firefunction-v2":
    "lists no tools without its own `functions` variable (as llama-server)",
};

const template = (name: string) => testTemplate(llamaTemplate(name));

/**
 * What a model that made the calls would have written after the prompt: the answered conversation from where
 * it parts from the prompt (a generation prompt may open a thinking block the rendered turn closes), from the
 * start of the tag it parts in.
 */
function writtenCalls(name: string, made: typeof calls): string {
  const prompt = template(name).render(asked, tools);
  const turn = template(name).render(answered(made), tools, {}, { addGenerationPrompt: false });
  let at = 0;
  while (at < prompt.length && prompt[at] === turn[at]) at++;
  const tag = turn.lastIndexOf("<", at - 1);
  if (at < prompt.length && tag > turn.lastIndexOf(">", at - 1)) at = tag;
  return turn.slice(at);
}

describe("every template's tool calls, written by the template and read back", () => {
  for (const name of llamaTemplateNames()) {
    const reason = NOT_READ[name];
    test(`${name}: ${reason ?? "read back"}`, () => {
      const format = detectToolCallFormat(llamaTemplate(name));
      // a harmony turn is one message per call: the generation prompt's header holds the first one's recipient
      const made = format === "harmony" || ONE_CALL.includes(name) ? calls.slice(0, 1) : calls;
      let read: { name: string; args: unknown }[];
      try {
        const output = writtenCalls(name, made);
        const parsed =
          format === "harmony"
            ? harmonyCalls(`<|start|>assistant${output}`, specs)
            : (parseToolCallsAs(format, output, specs)?.calls ?? []);
        read = parsed.map((c) => ({ name: c.name, args: JSON.parse(c.arguments) }));
      } catch (error) {
        if (reason !== undefined) return;
        throw error;
      }
      if (reason !== undefined) {
        assert.notDeepEqual(read, made, `${name} is read back now: take it off NOT_READ`);
        return;
      }
      assert.deepEqual(read, made, `as ${format}`);
    });
  }
});

describe("own formats through the server, streamed (their templates, the fake engine)", () => {
  for (const { name, reply, content, preserved } of [
    {
      name: "MiniMax-M2",
      reply:
        'Need the files.\n</think>\n\nLooking.\n<minimax:tool_call>\n<invoke name="bash">\n' +
        '<parameter name="command">ls -la</parameter>\n<parameter name="timeout">30</parameter>\n</invoke>\n' +
        '<invoke name="read_file">\n<parameter name="path">a.py</parameter>\n</invoke>\n</minimax:tool_call>',
      content: "Looking.",
      preserved: "<minimax:tool_call>",
    },
    {
      name: "deepseek-ai-DeepSeek-V3.2",
      reply:
        'Looking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="bash">\n<｜DSML｜parameter name="command" string="true">' +
        'ls -la</｜DSML｜parameter>\n<｜DSML｜parameter name="timeout" string="false">30</｜DSML｜parameter>\n' +
        '</｜DSML｜invoke>\n<｜DSML｜invoke name="read_file">\n<｜DSML｜parameter name="path" string="true">a.py' +
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
      content: "Looking.",
      preserved: "<｜DSML｜function_calls>",
    },
    {
      // the generation prompt ends with `>>>`: the first call comes without one
      name: "meetkai-functionary-medium-v3.2",
      reply: 'bash\n{"command": "ls -la", "timeout": 30}>>>read_file\n{"path": "a.py"}',
      content: "",
      preserved: ">>>all",
    },
    {
      // the generation prompt ends with `<|start|>assistant`: the first call's header comes from ` to=`
      name: "muse-glimmer",
      reply:
        ' to=bash<|message|><atem:function_calls>\n<atem:invoke name="bash">\n' +
        '<atem:parameter name="command">ls -la</atem:parameter>\n<atem:parameter name="timeout">30</atem:parameter>\n' +
        "</atem:invoke>\n</atem:function_calls><|eom|><|start|>assistant to=read_file<|message|><atem:function_calls>\n" +
        '<atem:invoke name="read_file">\n<atem:parameter name="path">a.py</atem:parameter>\n</atem:invoke>\n' +
        "</atem:function_calls>",
      content: "",
      preserved: "<|message|>",
    },
  ]) {
    test(`${name}: the content streams, the calls' markup never does, both calls come with their arguments typed; the scheduler is told the tool`, async () => {
      const chatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate(name) };
      await withServer({ chatTemplate, reply: () => [...reply] }, {}, async (t) => {
        const sse = await (
          await t.post("/v1/chat/completions", { messages: asked, tools, stream: true })
        ).text();
        const streamed = streamedChoice(sse);
        assert.equal(streamed.content.trim(), content);
        assert.deepEqual(
          streamed.calls.map((c) => ({ name: c.name, args: JSON.parse(c.args) })),
          calls,
        );
        assert.equal(streamed.finishReason, "tool_calls");
        // the scheduler prices the turn's pin by the tool it called, read in the same format
        assert.equal(t.engine.requests[0]!.toolNamer?.(reply), "bash");
        const kept = t.engine.requests[0]!.sampling.preservedTokens ?? [];
        assert.ok(kept.includes(preserved), JSON.stringify(kept));
      });
    });
  }
});

/** A whole chat completion's choice in the form of a streamed one. */
function wholeChoice(choice: Json): StreamedChoice {
  const { message } = choice;
  return {
    reasoning: message.reasoning_content ?? "",
    content: message.content ?? "",
    calls: (message.tool_calls ?? []).map((c: Json) => ({
      name: c.function.name,
      args: c.function.arguments,
    })),
    finishReason: choice.finish_reason,
  };
}

describe("Kimi K3 through the server: thinking, its response section, its tools section", () => {
  const chatTemplate = () => ({ ...qwen3ChatTemplate(), source: llamaTemplate("Kimi-K3") });
  const call =
    '<|open|>tools<|sep|><|open|>call tool="bash" index="1"<|sep|><|open|>argument key="command" type="string"<|sep|>' +
    'ls -la<|close|>argument<|sep|><|open|>argument key="timeout" type="number"<|sep|>30<|close|>argument<|sep|>' +
    "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";
  const reply = `Need the files.<|close|>think<|sep|><|open|>response<|sep|>Listing.<|close|>response<|sep|>${call}`;

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: the thinking, the content without its tags, the call`, async () => {
      await withServer({ chatTemplate: chatTemplate(), reply: () => [...reply] }, {}, async (t) => {
        const response = await t.post("/v1/chat/completions", { messages: asked, tools, stream });
        assert.ok(
          t.engine.requests[0]!.prompt.endsWith("<|open|>think<|sep|>"),
          "the prompt opens the thinking",
        );
        const read: StreamedChoice = stream
          ? streamedChoice(await response.text())
          : wholeChoice(((await response.json()) as Json).choices[0]);
        assert.equal(read.reasoning.trim(), "Need the files.");
        assert.equal(read.content.trim(), "Listing.");
        assert.deepEqual(
          read.calls.map((c) => ({ name: c.name, args: JSON.parse(c.args) })),
          calls.slice(0, 1),
        );
        const preserved = t.engine.requests[0]!.sampling.preservedTokens ?? [];
        for (const token of ["<|open|>", "<|close|>", "<|sep|>"]) assert.ok(preserved.includes(token), token);
      });
    });
  }

  test("an answer without tools ends at its response section's close", async () => {
    const answer =
      "Hi.<|close|>think<|sep|><|open|>response<|sep|>Hello there.<|close|>response<|sep|><|close|>message<|sep|>";
    await withServer({ chatTemplate: chatTemplate(), reply: () => [...answer] }, {}, async (t) => {
      const body = (await (await t.post("/v1/chat/completions", { messages: asked })).json()) as Json;
      assert.equal(body.choices[0].message.content, "Hello there.");
      const sse = await (await t.post("/v1/chat/completions", { messages: asked, stream: true })).text();
      assert.equal(streamedChoice(sse).content, "Hello there.");
    });
  });
});

describe("recipient formats through the server: their messages read as harmony's, whole and streamed", () => {
  const FUNCTIONARY = "meetkai-functionary-medium-v3.2";
  const MUSE = "muse-glimmer";
  const functionaryBash = 'bash\n{"command": "ls -la", "timeout": 30}';
  const museBash =
    ' to=bash<|message|><atem:function_calls>\n<atem:invoke name="bash">\n<atem:parameter name="command">ls -la' +
    '</atem:parameter>\n<atem:parameter name="timeout">30</atem:parameter>\n</atem:invoke>\n</atem:function_calls>';
  const bash = calls.slice(0, 1);
  const cases = [
    {
      name: FUNCTIONARY,
      what: "a plain answer",
      reply: "all\nLooking at it.\nAll fine.",
      reasoning: "",
      content: "Looking at it.\nAll fine.",
      called: [],
    },
    {
      name: FUNCTIONARY,
      what: "an answer, then a call",
      reply: `all\nLooking.>>>${functionaryBash}`,
      reasoning: "",
      content: "Looking.",
      called: bash,
    },
    {
      name: FUNCTIONARY,
      what: "two answers (`>>> ` in the text starts none), then a call",
      reply: `all\nIn a REPL:\n>>> ls>>>all\n Then.>>>${functionaryBash}`,
      reasoning: "",
      content: "In a REPL:\n>>> ls Then.",
      called: bash,
    },
    {
      name: MUSE,
      what: "thinking, then a plain answer",
      reply: " to=self<|message|>Need the files.<|eom|><|start|>assistant to=user<|message|>Looking at it.",
      reasoning: "Need the files.",
      content: "Looking at it.",
      called: [],
    },
    {
      name: MUSE,
      what: "an answer, then a call",
      reply: ` to=user<|message|>Looking.<|eom|><|start|>assistant${museBash}`,
      reasoning: "",
      content: "Looking.",
      called: bash,
    },
    {
      name: MUSE,
      what: "thinking, then a call",
      reply: ` to=self<|message|>Need the files.<|eom|><|start|>assistant${museBash}`,
      reasoning: "Need the files.",
      content: "",
      called: bash,
    },
  ];
  for (const { name, what, reply, reasoning, content, called } of cases) {
    for (const stream of [false, true]) {
      test(`${name}, ${what}, ${stream ? "streamed" : "whole"}: no header in the content, the thinking apart, the call`, async () => {
        const chatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate(name) };
        await withServer({ chatTemplate, reply: () => [...reply] }, {}, async (t) => {
          const response = await t.post("/v1/chat/completions", { messages: asked, tools, stream });
          const sse = stream ? await response.text() : "";
          const read: StreamedChoice = stream
            ? streamedChoice(sse)
            : wholeChoice(((await response.json()) as Json).choices[0]);
          assert.equal(read.reasoning.trim(), reasoning);
          assert.equal(read.content, content);
          assert.deepEqual(
            read.calls.map((c) => ({ name: c.name, args: JSON.parse(c.args) })),
            called,
          );
          assert.equal(read.finishReason, called.length > 0 ? "tool_calls" : "stop");
          assert.equal(t.engine.requests[0]!.toolNamer?.(reply), called[0]?.name ?? null);
          if (stream && content.length > 0) {
            // the answer streams as the model writes it, not all at the end
            const deltas = sseEvents(sse).filter(
              (frame) => frame.includes('"content":"') && !frame.includes('"content":""'),
            );
            assert.ok(deltas.length > 1, `${deltas.length} content deltas`);
          }
        });
      });
    }
  }

  test("a thinking budget ends Muse Glimmer's message to itself and opens one to the user", async () => {
    const chatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate(MUSE) };
    await withServer({ chatTemplate, reply: () => " to=user<|message|>Hi.<|eot|>" }, {}, async (t) => {
      await t.post("/v1/chat/completions", { messages: asked, thinking_budget: 100 });
      assert.deepEqual(t.engine.requests[0]!.sampling.thinkingBudget, {
        tokens: 100,
        open: " to=self<|message|>",
        closedBy: "<|eom|>",
        close: "<|eom|><|start|>assistant to=user<|message|>",
      });
    });
  });

  test("Messages: Muse Glimmer's thinking is a thinking block, its call a tool_use", async () => {
    const chatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate(MUSE) };
    const reply = ` to=self<|message|>Need the files.<|eom|><|start|>assistant${museBash}`;
    await withServer({ chatTemplate, reply: () => reply }, {}, async (t) => {
      const request = {
        model: "fake-model",
        max_tokens: 64,
        messages: [{ role: "user", content: "List the files." }],
        tools: [{ name: "bash", input_schema: tools[0]!.function.parameters }],
      };
      const message = (await (await t.post("/v1/messages", request)).json()) as Json;
      assert.deepEqual(
        message.content.map((block: Json) => [block.type, block.thinking ?? block.input]),
        [
          ["thinking", "Need the files."],
          ["tool_use", { command: "ls -la", timeout: 30 }],
        ],
      );
    });
  });

  test("Muse Glimmer with --reasoning-format none: its messages stay in the text, its calls are still read", async () => {
    const chatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate(MUSE) };
    const thinking = " to=self<|message|>Need the files.";
    await withServer(
      { chatTemplate, reply: () => [...`${thinking}<|eom|><|start|>assistant${museBash}`] },
      { reasoningFormat: "none" },
      async (t) => {
        for (const stream of [false, true]) {
          const response = await t.post("/v1/chat/completions", { messages: asked, tools, stream });
          const read: StreamedChoice = stream
            ? streamedChoice(await response.text())
            : wholeChoice(((await response.json()) as Json).choices[0]);
          assert.equal(read.reasoning, "");
          assert.equal(read.content.trim(), thinking.trim());
          assert.deepEqual(
            read.calls.map((c) => c.name),
            ["bash"],
          );
        }
      },
    );
  });

  test("a reply sent back renders as its template writes the answer and the call, not as one message's text", async () => {
    for (const [name, reply, rendered] of [
      [
        FUNCTIONARY,
        `all\nLooking.>>>${functionaryBash}`,
        `a.py.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n>>>all\nLooking.>>>${functionaryBash}<|eot_id|>`,
      ],
      // Muse Glimmer's template writes no text beside calls
      [
        MUSE,
        ` to=user<|message|>Looking.<|eom|><|start|>assistant${museBash}`,
        `a.py.<|eot|><|start|>assistant${museBash}<|eot|>`,
      ],
    ] as const) {
      const chatTemplate = { ...qwen3ChatTemplate(), source: llamaTemplate(name) };
      await withServer({ chatTemplate, reply: () => reply }, {}, async (t) => {
        const first = (await (
          await t.post("/v1/chat/completions", { messages: asked, tools })
        ).json()) as Json;
        const { message } = first.choices[0];
        const next = [
          ...asked,
          { role: "assistant", content: message.content, tool_calls: message.tool_calls },
          { role: "tool", tool_call_id: message.tool_calls[0].id, content: "a.py" },
        ];
        await t.post("/v1/chat/completions", { messages: next, tools });
        const prompt = t.engine.requests[1]!.prompt;
        assert.ok(prompt.includes(rendered), prompt.slice(-600));
      });
    }
  });
});

describe("section formats' own details", () => {
  const read = (format: Parameters<typeof parseToolCallsAs>[0], output: string) =>
    parseToolCallsAs(format, output, specs)?.calls.map((c) => [c.name, JSON.parse(c.arguments)]);

  test("MiniCPM5: a value in a CDATA block is taken as written, tags and newlines included", () => {
    const output =
      '<function name="bash"><param name="command"><![CDATA[cat <<EOF > a.py\nprint(1)\nEOF]]></param>' +
      '<param name="timeout">5</param></function>';
    assert.deepEqual(read("minicpm5", output), [
      ["bash", { command: "cat <<EOF > a.py\nprint(1)\nEOF", timeout: 5 }],
    ]);
  });

  test("bare values are typed by the tool's schema: a string stays text though it reads as JSON", () => {
    const output =
      '<minimax:tool_call>\n<invoke name="bash">\n<parameter name="command">123</parameter>\n' +
      '<parameter name="timeout">30</parameter>\n</invoke>\n</minimax:tool_call>';
    assert.deepEqual(read("minimax", output), [["bash", { command: "123", timeout: 30 }]]);
  });

  test("a section cut off (max_tokens) still gives the calls written so far", () => {
    const output =
      '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n<｜DSML｜parameter name="path" string="true">a.p';
    assert.deepEqual(read("dsml", output), [["read_file", { path: "a.p" }]]);
  });
});

describe("recipient formats' own details", () => {
  const read = (format: ToolCallFormat, output: string) => {
    const parsed = parseToolCallsAs(format, output, specs);
    return (
      parsed && { start: parsed.start, calls: parsed.calls.map((c) => [c.name, JSON.parse(c.arguments)]) }
    );
  };

  test("Functionary v3.2: calls follow the text to `all`; a `>>>` in the text or in an argument opens no call", () => {
    const output =
      "all\nIn a REPL:\n>>> print(1)\nLooking.>>>bash\n" +
      '{"command": "echo \\">>>x\\n{}\\""}>>>read_file\n{"path": "a.py"}';
    assert.deepEqual(read("functionary-v3.2", output), {
      start: output.indexOf(">>>bash"),
      calls: [
        ["bash", { command: 'echo ">>>x\n{}"' }],
        ["read_file", { path: "a.py" }],
      ],
    });
  });

  test("Muse Glimmer: ATEM markup in the thinking or the answer is text; a call is a message of its own", () => {
    const invoke = (command: string) =>
      '<atem:function_calls>\n<atem:invoke name="bash">\n' +
      `<atem:parameter name="command">${command}</atem:parameter>\n</atem:invoke>\n</atem:function_calls>`;
    const quoted =
      ` to=self<|message|>I could use ${invoke("rm -rf /")}<|eom|>` +
      `<|start|>assistant to=user<|message|>It is called like ${invoke("ls")}`;
    assert.equal(read("muse-glimmer", quoted), null);
    const answered = " to=user<|message|>Listing.";
    assert.deepEqual(
      read("muse-glimmer", `${answered}<|eom|><|start|>assistant to=bash<|message|>${invoke("ls")}`),
      {
        start: answered.length,
        calls: [["bash", { command: "ls" }]],
      },
    );
  });

  test("any chunking streams the thinking and the answer the whole output reads as", () => {
    const outputs: [RecipientFormatName, string][] = [
      [
        "functionary-v3.2",
        'all\nIn a REPL:\n>>> ls>>>all\n Then.>>>bash\n{"command": "a>>>all\\nb"}>>>all\nDone',
      ],
      ["functionary-v3.2", "all\nA >>"],
      ["functionary-v3.2", "Hello there, no recipient"],
      ["functionary-v3.2", "all"],
      [
        "muse-glimmer",
        " to=self<|message|>Hm <|x|>.<|eom|><|start|>assistant to=user<|message|>Hi <b>.<|eot|>",
      ],
      [
        "muse-glimmer",
        " to=user<|message|>A.<|eom|><|start|>assistant to=bash<|message|><atem:x><|eom|><|start|>assistant<|message|>B",
      ],
      ["muse-glimmer", " to=self<|message|>cut <|eo"],
      ["muse-glimmer", "no messages"],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...outputs),
        fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1 }),
        ([format, text], cuts) => {
          const syntax = recipientMessages(format, true)!;
          const stream = new MessageStream(syntax);
          let reasoning = "";
          let answer = "";
          let at = 0;
          for (let i = 0; at < text.length; i++) {
            const size = cuts[i % cuts.length]!;
            const piece = stream.push(text.slice(at, at + size));
            reasoning += piece.reasoning;
            answer += piece.answer;
            at += size;
          }
          const end = stream.finish();
          const whole = readMessageText(text, messagesIn(text, syntax));
          assert.equal(`${reasoning}${end.reasoning}`.trim(), whole.reasoning ?? "");
          assert.equal(`${answer}${end.answer}`, whole.content ?? "");
          if (whole.content !== null) assert.equal(stream.answerStart, whole.answerStart);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("Muse Glimmer: a call cut off (max_tokens) still gives the arguments written so far", () => {
    const output =
      ' to=bash<|message|><atem:function_calls>\n<atem:invoke name="bash">\n<atem:parameter name="command">ls -l';
    assert.deepEqual(read("muse-glimmer", output)?.calls, [["bash", { command: "ls -l" }]]);
  });
});
