import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { ModelChatTemplate } from "../../engine/engine-api.js";
import { isNativeAvailable } from "../../engine/native/llama-native.js";
import { LlamaModelRunner } from "../../engine/runners/llama-model-runner.js";
import { writeTemplateGguf } from "../../engine/test-support/template-gguf.js";
import { CHATML_TEMPLATE } from "../../gguf/index.js";
import { detectToolCallFormat, parseToolCallsAs, type ToolCallFormat } from "../output/tool-call-formats.js";
import type { ToolInput } from "../schemas.js";
import { BASH_TOOL, TOOL_CONVERSATION, testTemplate } from "../test-support/chat-fixtures.js";
import { llamaTemplate, ollamaGgufTemplate, qwen3ChatTemplate } from "../test-support/llama-templates.js";
import { type Json, withServer } from "../test-support/test-server.js";
import { type ChatTemplate, serverChatTemplate } from "./chat-template.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();

const tools: ToolInput[] = [BASH_TOOL];

const conversation = TOOL_CONVERSATION;

const TOOL_JSON =
  '{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": ' +
  '{"type": "object", "properties": {"command": {"type": "string", "description": "The command"}}, ' +
  '"required": ["command"]}}}';

const COMPACT_TOOL_JSON = JSON.stringify(JSON.parse(TOOL_JSON));

const QWEN_TOOLS =
  "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n" +
  `<tools>\n${TOOL_JSON}\n</tools>\n\n` +
  "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';

const QWEN_TURNS =
  "<|im_start|>user\nList the files.<|im_end|>\n" +
  '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>\n' +
  "<|im_start|>user\n<tool_response>\nmain.py\n</tool_response><|im_end|>\n" +
  "<|im_start|>assistant\n";

const LLAMA31_TOOL_JSON = [
  "{",
  '    "type": "function",',
  '    "function": {',
  '        "name": "bash",',
  '        "description": "Run a command",',
  '        "parameters": {',
  '            "type": "object",',
  '            "properties": {',
  '                "command": {',
  '                    "type": "string",',
  '                    "description": "The command"',
  "                }",
  "            },",
  '            "required": [',
  '                "command"',
  "            ]",
  "        }",
  "    }",
  "}",
].join("\n");

const LLAMA31_PROMPT =
  "<|start_header_id|>system<|end_header_id|>\n\n" +
  "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" +
  "Fix the bug.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" +
  "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
  'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
  `${LLAMA31_TOOL_JSON}\n\nList the files.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n` +
  '{"name": "bash", "parameters": {"command": "ls"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n' +
  '"main.py"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n';

interface Family {
  /** llama.cpp's models/templates/<file>.jinja, unless `source` gives the template */
  readonly file: string;
  readonly source?: () => string;
  readonly format: ToolCallFormat;
  /** the prompt of `conversation` with `tools`; the built-in vocabulary's BOS is <s>, its EOS <|im_end|> */
  readonly prompt: string;
  /** what the model would answer, in its own format */
  readonly output: string;
}

const families: Family[] = [
  {
    file: "Qwen-Qwen2.5-7B-Instruct",
    format: "hermes",
    prompt: `<|im_start|>system\nFix the bug.\n\n${QWEN_TOOLS}<|im_end|>\n${QWEN_TURNS}`,
    output: '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>',
  },
  {
    file: "Qwen-Qwen3-0.6B",
    format: "hermes",
    prompt: `<|im_start|>system\nFix the bug.\n\n${QWEN_TOOLS}<|im_end|>\n${QWEN_TURNS}`,
    output:
      '<think>\nList them all.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>',
  },
  {
    // The template's leading BOS is dropped: the tokenizer adds it.
    file: "meta-llama-Llama-3.1-8B-Instruct",
    format: "llama3",
    prompt: LLAMA31_PROMPT,
    output: '{"name": "bash", "parameters": {"command": "ls -la"}}',
  },
  {
    // Llama 3.3 ships 3.1's template unchanged.
    file: "meta-llama-Llama-3.3-70B-Instruct",
    format: "llama3",
    prompt: LLAMA31_PROMPT,
    output: '{"name": "bash", "parameters": {"command": "ls -la"}}',
  },
  {
    // Nemo puts the system message into the last user turn only, and ends tool calls with EOS.
    file: "mistralai-Mistral-Nemo-Instruct-2407",
    format: "mistral",
    prompt:
      `[AVAILABLE_TOOLS][${TOOL_JSON}][/AVAILABLE_TOOLS][INST]List the files.[/INST]` +
      '[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls"}, "id": "a1b2c3d4e"}]<|im_end|>' +
      '[TOOL_RESULTS]{"content": main.py, "call_id": "a1b2c3d4e"}[/TOOL_RESULTS]',
    output: '[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls -la"}}]',
  },
  {
    file: "Mistral-Small-3.2-24B-Instruct-2506",
    format: "mistral",
    prompt:
      `[SYSTEM_PROMPT]Fix the bug.[/SYSTEM_PROMPT][AVAILABLE_TOOLS][${TOOL_JSON}][/AVAILABLE_TOOLS]` +
      '[INST]List the files.[/INST][TOOL_CALLS]bash[CALL_ID]a1b2c3d4e[ARGS]{"command": "ls"}<|im_end|>' +
      "[TOOL_RESULTS]a1b2c3d4e[TOOL_CONTENT]main.py[/TOOL_RESULTS]",
    output: '[TOOL_CALLS]bash[ARGS]{"command": "ls -la"}',
  },
  {
    file: "deepseek-ai-DeepSeek-V3.1",
    format: "deepseek",
    prompt:
      "Fix the bug.<｜User｜>List the files.<｜Assistant｜><think></think>" +
      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>bash<｜tool▁sep｜>{"command": "ls"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>' +
      "<｜end▁of▁sentence｜><｜tool▁output▁begin｜>main.py<｜tool▁output▁end｜>",
    output:
      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>bash<｜tool▁sep｜>{"command": "ls -la"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
  },
  {
    file: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    format: "deepseek",
    prompt:
      "Fix the bug.<｜User｜>List the files.<｜Assistant｜>" +
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n" +
      '{"command": "ls"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>' +
      "<｜Assistant｜><｜end▁of▁sentence｜>" +
      "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>main.py<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
    output:
      "Listing.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n" +
      '{"command": "ls -la"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
  },
  {
    // Gemma 4: tools declared in the system turn in its own notation (strings between <|"|>), the
    // tool's answer inside the model's turn, which the model then continues (no new turn header).
    file: "google-gemma-4-31B-it",
    format: "gemma",
    prompt:
      '<|turn>system\nFix the bug.<|tool>declaration:bash{description:<|"|>Run a command<|"|>,' +
      'parameters:{properties:{command:{description:<|"|>The command<|"|>,type:<|"|>STRING<|"|>}},' +
      'required:[<|"|>command<|"|>],type:<|"|>OBJECT<|"|>}}<tool|><turn|>\n' +
      "<|turn>user\nList the files.<turn|>\n" +
      '<|turn>model\n<|tool_call>call:bash{command:<|"|>ls<|"|>}<tool_call|>' +
      '<|tool_response>response:bash{value:<|"|>main.py<|"|>}<tool_response|>',
    output: '<|tool_call>call:bash{command:<|"|>ls -la<|"|>}<tool_call|>',
  },
  {
    // Gemma 3 knows no tools and no system role, and reads a system message only as typed parts: the
    // system text and the tool list open the first user turn, the call is the model's text, the result
    // a user turn (roles must alternate). The model answers in the <tool_call> blocks it was shown.
    file: "google-gemma-3-1b-it",
    source: () => ollamaGgufTemplate("library/gemma3:1b"),
    format: "generic",
    prompt:
      `<start_of_turn>user\nFix the bug.\n\n# Tools\n\nYou can call these functions:\n<tools>\n${COMPACT_TOOL_JSON}\n</tools>\n\n` +
      'To call a function, reply with {"name": ..., "arguments": ...} inside <tool_call></tool_call> tags.\n\n' +
      "List the files.<end_of_turn>\n" +
      '<start_of_turn>model\n<tool_call>\n{"name": "bash", "arguments": {"command":"ls"}}\n</tool_call><end_of_turn>\n' +
      "<start_of_turn>user\n<tool_response>\nmain.py\n</tool_response><end_of_turn>\n<start_of_turn>model\n",
    output: '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>',
  },
  {
    // Kimi K2: calls between section markers, each named `functions.<name>:<index>`; the tool's result
    // under "## Return of <id>" (the template writes its "\\n" as the two characters)
    file: "moonshotai-Kimi-K2",
    format: "kimi",
    prompt:
      `<|im_system|>tool_declare<|im_middle|>[${TOOL_JSON}]<|im_end|>` +
      "<|im_system|>system<|im_middle|>Fix the bug.<|im_end|><|im_user|>user<|im_middle|>List the files.<|im_end|>" +
      "<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>functions.bash:0" +
      '<|tool_call_argument_begin|>{"command": "ls"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>' +
      "<|im_system|>tool<|im_middle|>## Return of a1b2c3d4e\\nmain.py<|im_end|><|im_assistant|>assistant<|im_middle|>",
    output:
      "Listing.<|tool_calls_section_begin|><|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>" +
      '{"command": "ls -la"}<|tool_call_end|><|tool_calls_section_end|>',
  },
  {
    file: "GLM-4.6",
    format: "glm",
    prompt:
      `[gMASK]<sop><|system|>\n${QWEN_TOOLS.slice(0, QWEN_TOOLS.indexOf("For each"))}` +
      "For each function call, output the function name and arguments within the following XML format:\n" +
      "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n" +
      "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>" +
      "<|system|>\nFix the bug.<|user|>\nList the files.<|assistant|>\n<think></think>\n" +
      "<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>ls</arg_value>\n</tool_call>" +
      "<|observation|>\n<tool_response>\nmain.py\n</tool_response><|assistant|>",
    output: "<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>ls -la</arg_value>\n</tool_call>",
  },
];

function sourceOf(family: Family): string {
  return family.source ? family.source() : llamaTemplate(family.file);
}

describe("real models' chat templates from GGUF metadata", {
  skip: supported ? false : "no llama.cpp addon",
}, () => {
  let dir: string;
  const models = new Map<string, ModelChatTemplate>();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-templates-"));
    for (const family of families) {
      const modelPath = join(dir, `${family.file}.gguf`);
      await writeTemplateGguf(modelPath, sourceOf(family));
      const runner = await LlamaModelRunner.open({ modelPath, kvCells: 256, maxSeqs: 1, threads: 1 });
      models.set(family.file, runner.chatTemplate);
      await runner.close();
    }
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const family of families) {
    test(`${family.file}: the prompt as the template writes it, and a ${family.format} tool call read back`, async () => {
      const model = models.get(family.file)!;
      assert.equal(model.source, sourceOf(family));
      assert.equal(detectToolCallFormat(model.source), family.format);
      await withServer({ chatTemplate: model, reply: () => family.output }, {}, async (t) => {
        const response = await t.post("/v1/chat/completions", { messages: conversation, tools });
        const body: Json = await response.json();
        assert.equal(response.status, 200, JSON.stringify(body));
        assert.equal(t.engine.requests[0]!.prompt, family.prompt);
        const choice = body.choices[0];
        assert.equal(choice.finish_reason, "tool_calls");
        assert.equal(choice.message.tool_calls.length, 1);
        const call = choice.message.tool_calls[0];
        assert.equal(call.function.name, "bash");
        assert.deepEqual(JSON.parse(call.function.arguments), { command: "ls -la" });
        // Mistral's templates refuse any other id when the call comes back in the next request.
        if (family.format === "mistral") assert.match(call.id, /^[A-Za-z0-9]{9}$/);
      });
    });
  }
});

function templateOf(file: string): ChatTemplate {
  const family = families.find((f) => f.file === file);
  return testTemplate(family ? sourceOf(family) : llamaTemplate(file));
}

describe("rendering with a model's template", () => {
  for (const file of [
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
  ]) {
    test(`${file}: turn N+1's prompt extends turn N's prompt and output (its KV is reused)`, () => {
      const template = templateOf(file);
      const first = conversation.slice(0, 2);
      const output = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>';
      const turn1 = template.render(first, tools);
      const turn2 = template.render(conversation, tools);
      assert.ok(
        turn2.startsWith(turn1 + output),
        `${JSON.stringify(turn1 + output)}\n${JSON.stringify(turn2)}`,
      );
      assert.ok(turn2.length > (turn1 + output).length);
    });
  }

  test("Hermes 3: turns in ChatML after its tool preamble, tool results under role tool", () => {
    const prompt = templateOf("NousResearch-Hermes-3-Llama-3.1-8B-tool_use").render(conversation, tools);
    assert.ok(prompt.startsWith("<|im_start|>system\nYou are a function calling AI model."), prompt);
    assert.ok(
      prompt.endsWith(
        "<|im_start|>system\nFix the bug.<|im_end|>\n<|im_start|>user\nList the files.<|im_end|>\n" +
          '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>\n' +
          "<|im_start|>tool\n<tool_response>\nmain.py\n</tool_response><|im_end|><|im_start|>assistant\n",
      ),
      prompt,
    );
  });

  test("a template that joins a call's arguments to a string (Functionary v3.2) gets them as JSON text, as llama-server decides it", () => {
    const functionary = templateOf("meetkai-functionary-medium-v3.2").render(conversation, tools);
    assert.ok(functionary.includes('>>>bash\n{"command":"ls"}<|eot_id|>'), functionary);
    assert.ok(!functionary.includes("[object Map]"));
    // a template that formats the object itself still gets the object
    const hermes = templateOf("NousResearch-Hermes-3-Llama-3.1-8B-tool_use").render(conversation, tools);
    assert.ok(hermes.includes('{"name": "bash", "arguments": {"command": "ls"}}'), hermes);
  });

  test("Firefunction v2 renders with llama-server's datetime; its functions stay undefined, as llama-server leaves them", () => {
    const prompt = templateOf("fireworks-ai-llama-3-firefunction-v2").render(conversation, tools);
    assert.match(
      prompt,
      /Available functions as JSON spec:\n\nToday is [A-Z][a-z]{2} \d{2} \d{4}\.<\|eot_id\|>/,
    );
    assert.ok(
      prompt.includes(' functools[{"name": "bash", "arguments": {"command": "ls"}}]<|eot_id|>'),
      prompt,
    );
  });

  test("chat_template_kwargs reach the template: Qwen3's enable_thinking false opens and closes an empty think block", async () => {
    await withServer({ chatTemplate: qwen3ChatTemplate() }, {}, async (t) => {
      const messages = conversation.slice(1, 2);
      await (await t.post("/v1/chat/completions", { messages })).json();
      await (
        await t.post("/v1/chat/completions", { messages, chat_template_kwargs: { enable_thinking: false } })
      ).json();
      assert.ok(t.engine.requests[0]!.prompt.endsWith("<|im_start|>assistant\n"));
      assert.ok(t.engine.requests[1]!.prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
      const refused = await t.post("/v1/chat/completions", {
        messages,
        chat_template_kwargs: { messages: [], add_generation_prompt: false },
      });
      assert.equal(refused.status, 400);
      assert.match(((await refused.json()) as Json).error.message, /messages, add_generation_prompt/);
    });
  });

  test("a template without a system role gets the system text in the first user turn; what it still refuses is a 400 naming its reason", async () => {
    const gemma: ModelChatTemplate = {
      source: llamaTemplate("google-gemma-2-2b-it"),
      bosToken: "<bos>",
      eosToken: "<eos>",
      eosTokenId: 1,
      addsBos: true,
    };
    await withServer({ chatTemplate: gemma }, {}, async (t) => {
      const ok = await t.post("/v1/chat/completions", { messages: conversation.slice(0, 2) });
      assert.equal(ok.status, 200);
      await ok.json();
      assert.equal(
        t.engine.requests[0]!.prompt,
        "<start_of_turn>user\nFix the bug.\n\nList the files.<end_of_turn>\n<start_of_turn>model\n",
      );
      // two user messages in a row make one turn (template-polyfills.test.ts); a conversation the assistant opens is not
      const refused = await t.post("/v1/chat/completions", {
        messages: [
          { role: "assistant", content: "Hi" },
          { role: "user", content: "Hi again" },
        ],
      });
      assert.equal(refused.status, 400);
      assert.match(((await refused.json()) as Json).error.message, /roles must alternate/);
    });
  });

  test("a tool-blind template: results of several calls and the user's next words make one user turn", () => {
    const prompt = templateOf("google-gemma-3-1b-it").render(
      [
        { role: "user", content: "List the files." },
        {
          role: "assistant",
          content: "Two at once.",
          tool_calls: [
            { id: "c1", type: "function", function: { name: "bash", arguments: '{"command": "ls"}' } },
            { id: "c2", type: "function", function: { name: "bash", arguments: '{"command": "pwd"}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "main.py" },
        { role: "tool", tool_call_id: "c2", content: "/src" },
        { role: "user", content: "Now read it." },
      ],
      tools,
    );
    assert.ok(
      prompt.endsWith(
        '<start_of_turn>model\nTwo at once.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n' +
          '<tool_call>\n{"name": "bash", "arguments": {"command": "pwd"}}\n</tool_call><end_of_turn>\n' +
          "<start_of_turn>user\n<tool_response>\nmain.py\n</tool_response>\n<tool_response>\n/src\n</tool_response>\n" +
          "Now read it.<end_of_turn>\n<start_of_turn>model\n",
      ),
      prompt,
    );
  });

  test("the built-in models' ChatML template keeps the engine's rendering; --chat-template overrides any", () => {
    const builtin: ModelChatTemplate = {
      source: CHATML_TEMPLATE,
      bosToken: "<s>",
      eosToken: "<|im_end|>",
      eosTokenId: 7,
      addsBos: true,
    };
    assert.equal(serverChatTemplate(builtin, null), null);
    assert.equal(serverChatTemplate({ ...builtin, source: null }, null), null);
    const override = serverChatTemplate(
      builtin,
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}",
    );
    assert.equal(
      override?.render(conversation.slice(0, 2), []),
      "[system] Fix the bug.\n[user] List the files.\n",
    );
  });

  test("parsing by format: Mistral's calls, several DeepSeek calls, GLM values typed by the schema, Gemma 4's notation", () => {
    const specs = [
      {
        name: "edit",
        parameters: { type: "object", properties: { line: { type: "integer" }, text: { type: "string" } } },
      },
    ];
    const calls = (format: ToolCallFormat, output: string) =>
      parseToolCallsAs(format, output, specs)?.calls.map((c) => [c.name, JSON.parse(c.arguments)]);
    assert.deepEqual(
      calls(
        "mistral",
        'Sure.[TOOL_CALLS][{"name": "edit", "arguments": {"line": 3}}, {"name": "edit", "arguments": {"line": 4}}]',
      ),
      [
        ["edit", { line: 3 }],
        ["edit", { line: 4 }],
      ],
    );
    assert.deepEqual(
      calls(
        "deepseek",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>edit<｜tool▁sep｜>{"line": 1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>edit<｜tool▁sep｜>{"line": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
      ),
      [
        ["edit", { line: 1 }],
        ["edit", { line: 2 }],
      ],
    );
    assert.deepEqual(
      calls(
        "glm",
        "<tool_call>edit\n<arg_key>line</arg_key>\n<arg_value>12</arg_value>\n<arg_key>text</arg_key>\n<arg_value>42</arg_value>\n</tool_call>",
      ),
      [["edit", { line: 12, text: "42" }]],
    );
    assert.deepEqual(
      calls(
        "gemma",
        'Editing.<|tool_call>call:edit{line:3,text:<|"|>say "hi", {twice}<|"|>,opts:{<|"|>dry<|"|>:true,tags:[1,null]}}<tool_call|>' +
          "<|tool_call>call:edit{line:-4.5}<tool_call|>",
      ),
      [
        ["edit", { line: 3, text: 'say "hi", {twice}', opts: { dry: true, tags: [1, null] } }],
        ["edit", { line: -4.5 }],
      ],
    );
    assert.equal(parseToolCallsAs("gemma", '<|tool_call>call:edit{text:<|"|>cut off', specs), null);
    assert.equal(parseToolCallsAs("mistral", "No call here.", specs), null);
  });
});
