import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "../core/test-support/fast-check.js";
import {
  parseForkToolName,
  parseToolName,
  stripReasoning,
  toolNameFromOpenAIToolCalls,
} from "./parse-tool-call.js";

const FENCE = "```";

/** Qwen3 thinking output: long reasoning that itself sketches a command, then the real action. */
const QWEN3_WITH_DECOY = `<think>
Okay, the failing test is test_parse_dates in tests/test_utils.py. The traceback mentions a timezone
offset, so the bug is probably in utils.parse_date. Before running anything I considered wiping the
build artefacts with:

${FENCE}bash
rm -rf build/ dist/ *.egg-info
${FENCE}

but that is destructive and unrelated to the failure. Better to run just the failing test first so I
can read the full traceback, then open utils.py around the parsing code.
</think>

THOUGHT: Run the failing test to see the full traceback before editing utils.py.

${FENCE}bash
cd /testbed && python -m pytest tests/test_utils.py::test_parse_dates -x -q
${FENCE}`;

describe("stripReasoning", () => {
  it("removes think and thinking blocks", () => {
    assert.equal(stripReasoning("<think>plan</think>answer"), "answer");
    assert.equal(stripReasoning("a<thinking>x</thinking>b<think>y</think>c"), "abc");
  });

  it("drops everything before a closing tag the chat template opened", () => {
    assert.equal(stripReasoning("reasoning without opening tag</think>\n\nanswer"), "\n\nanswer");
  });

  it("treats an unclosed think block as reasoning to the end", () => {
    assert.equal(stripReasoning("Sure.<think>I was cut off while thinking"), "Sure.");
  });

  it("keeps a stray closing tag that follows a complete block", () => {
    assert.equal(stripReasoning("<think>x</think>echo '</think>'"), "echo '</think>'");
  });

  it("leaves output without reasoning alone", () => {
    assert.equal(stripReasoning("just an answer"), "just an answer");
  });
});

describe("parseToolName: Hermes/Qwen tool_call", () => {
  it("names the first call after the reasoning", () => {
    const output = `<think>
The user wants the weather in Paris, and the time there. I will call get_weather first.
</think>

<tool_call>
{"name": "get_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}}
</tool_call>
<tool_call>
{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}
</tool_call>`;
    assert.equal(parseToolName(output), "get_weather");
  });

  it("reads the name even when the arguments are not valid JSON", () => {
    const output =
      '<tool_call>\n{"name": "write_file", "arguments": {"content": "line 1\nline 2"}}\n</tool_call>';
    assert.equal(parseToolName(output), "write_file");
  });

  it("reads Qwen3-Coder's XML function calls", () => {
    const output = `I'll look at the repository layout first.
<tool_call>
<function=str_replace_editor>
<parameter=command>
view
</parameter>
<parameter=path>
/testbed
</parameter>
</function>
</tool_call>`;
    assert.equal(parseToolName(output), "str_replace_editor");
  });

  it("reads a call whose closing tag was cut off by the stop token", () => {
    assert.equal(parseToolName('<tool_call>\n{"name": "search", "arguments": {"q": "x"}}'), "search");
  });
});

describe("parseToolName: Llama 3", () => {
  it("reads JSON after the python tag", () => {
    const output =
      '<|python_tag|>{"name": "get_current_conditions", "parameters": {"location": "San Francisco, CA", "unit": "Fahrenheit"}}<|eom_id|>';
    assert.equal(parseToolName(output), "get_current_conditions");
  });

  it("reads a function call after the python tag, built-in tools without .call", () => {
    assert.equal(
      parseToolName('<|python_tag|>brave_search.call(query="weather in Menlo Park")'),
      "brave_search",
    );
    assert.equal(parseToolName('<|python_tag|>get_weather(city="Paris", unit="c")'), "get_weather");
  });

  it("reads plain JSON calls with parameters or a function type", () => {
    assert.equal(
      parseToolName('{"name": "get_current_weather", "parameters": {"location": "Boston, MA"}}'),
      "get_current_weather",
    );
    assert.equal(
      parseToolName('  {"type": "function", "name": "web_search", "parameters": {}}'),
      "web_search",
    );
  });

  it("rejects a tool name containing whitespace", () => {
    assert.equal(parseToolName('{"name": "get weather", "parameters": {}}'), null);
  });

  it("does not take a JSON answer with a name field for a call", () => {
    assert.equal(parseToolName('{"name": "Alice", "age": 30}'), null);
  });

  it("reads the first call of a pythonic list", () => {
    const output =
      "[get_weather(city='San Francisco', metric='celsius'), get_time(tz='America/Los_Angeles')]";
    assert.equal(parseToolName(output), "get_weather");
  });

  it("does not take a markdown link for a pythonic call", () => {
    assert.equal(parseToolName("[the docs](https://example.com/docs) explain it"), null);
  });
});

describe("parseToolName: Terminal-Bench commands", () => {
  it("reads the head command of the first keystrokes", () => {
    const output = `{
  "analysis": "The directory listing is empty; the data file must be elsewhere.",
  "plan": "Search for the csv file, then inspect it.",
  "commands": [
    {"keystrokes": "cd /app && find / -name 'data.csv' 2>/dev/null\\n", "duration": 1.0},
    {"keystrokes": "head data.csv\\n", "duration": 0.1}
  ],
  "task_complete": false
}`;
    assert.equal(parseToolName(output), "find");
  });

  it("finds the JSON inside prose and a json fence", () => {
    const output = `I will count the rows.\n${FENCE}json\n{"analysis": "ok", "plan": "count", "commands": [{"keystrokes": "awk '{n++} END {print n}' data.csv\\n", "duration": 0.5}], "task_complete": false}\n${FENCE}`;
    assert.equal(parseToolName(output), "awk");
  });

  it("returns null when the agent sends no commands", () => {
    assert.equal(
      parseToolName('{"analysis": "done", "plan": "", "commands": [], "task_complete": true}'),
      null,
    );
  });
});

describe("parseToolName: single bash block", () => {
  it("reads mini-swe-agent's action, skipping cd", () => {
    const output = `THOUGHT: I need to see the failing test's traceback.\n\n${FENCE}bash\ncd /testbed && python -m pytest tests/test_utils.py -x -q\n${FENCE}`;
    assert.equal(parseToolName(output), "python");
  });

  it("accepts sh and shell fences", () => {
    assert.equal(parseToolName(`${FENCE}sh\nmake -j2\n${FENCE}`), "make");
    assert.equal(parseToolName(`${FENCE}shell\nsudo apt-get update\n${FENCE}`), "apt-get");
  });

  it("returns null for zero or several bash blocks", () => {
    assert.equal(parseToolName("THOUGHT: I am done."), null);
    assert.equal(parseToolName(`${FENCE}bash\nls\n${FENCE}\nand\n${FENCE}bash\npwd\n${FENCE}`), null);
  });

  it("ignores a bash block inside the reasoning", () => {
    assert.equal(parseToolName(QWEN3_WITH_DECOY), "python");
  });

  it("ignores reasoning whose opening tag came from the chat template", () => {
    const output = QWEN3_WITH_DECOY.replace("<think>\n", "");
    assert.equal(parseToolName(output), "python");
  });

  it("does not pick a command the model only thought about", () => {
    const output = `<think>\nMaybe:\n${FENCE}bash\nrm -rf build/\n${FENCE}\nNo, I'm done.\n</think>\n\nThe fix is complete.`;
    assert.equal(parseToolName(output), null);
  });

  it("keeps a command that mentions a think tag after the reasoning", () => {
    const output = `Looking for the tag parser.</think>\n\n${FENCE}bash\ngrep -rn '</think>' src/\n${FENCE}`;
    assert.equal(parseToolName(output), "grep");
  });
});

describe("parseForkToolName", () => {
  it("reports cd for a cd-prefixed command, as the authors' fork did", () => {
    assert.equal(
      parseForkToolName(`THOUGHT: run tests\n\n${FENCE}bash\ncd /testbed && pytest -x\n${FENCE}`),
      "cd",
    );
  });

  it("takes the first word of the only bash block", () => {
    assert.equal(
      parseForkToolName(`${FENCE}bash\n  /usr/bin/python3 -m pytest\n${FENCE}`),
      "/usr/bin/python3",
    );
  });

  it("does not strip reasoning, so a decoy block makes the output unparseable", () => {
    assert.equal(parseForkToolName(QWEN3_WITH_DECOY), null);
  });

  it("returns null without exactly one bash block", () => {
    assert.equal(parseForkToolName("no block"), null);
    assert.equal(parseForkToolName(`${FENCE}sh\nls\n${FENCE}`), null);
    assert.equal(parseForkToolName(`${FENCE}bash\n\n${FENCE}`), null);
  });
});

describe("toolNameFromOpenAIToolCalls", () => {
  it("names the first function", () => {
    const toolCalls = [{ function: { name: "read_file" } }, { function: { name: "write_file" } }];
    assert.equal(toolNameFromOpenAIToolCalls(toolCalls), "read_file");
  });

  it("skips calls without a usable name", () => {
    assert.equal(
      toolNameFromOpenAIToolCalls([{}, { function: { name: " " } }, { function: { name: "ls" } }]),
      "ls",
    );
  });

  it("returns null for no calls", () => {
    assert.equal(toolNameFromOpenAIToolCalls(undefined), null);
    assert.equal(toolNameFromOpenAIToolCalls([]), null);
  });
});

const FRAGMENTS = [
  "<think>",
  "</think>",
  "<thinking>",
  "<tool_call>",
  "</tool_call>",
  "<function=",
  "<|python_tag|>",
  `${FENCE}bash\n`,
  `${FENCE}sh\n`,
  `\n${FENCE}`,
  "{",
  "}",
  "[",
  "(",
  '"name": ',
  '"get weather"',
  "'my prog' ",
  "<|python_tag|>{",
  '"parameters": {}',
  '"commands": [',
  '{"keystrokes": "',
  "cd ",
  "sudo ",
  "timeout ",
  "FOO=1 ",
  "&&",
  "|",
  ";",
  "#",
  "\\",
  "'",
  '"',
  "/",
  "\n",
  " ",
  "\u00a0",
];

const fragmentSoup = fc
  .array(fc.oneof(fc.constantFrom(...FRAGMENTS), fc.string({ maxLength: 6 })), { maxLength: 40 })
  .map((parts) => parts.join(""));

const modelLikeOutput = fc.oneof(
  fragmentSoup,
  fragmentSoup.map((script) => `${FENCE}bash\n${script}\n${FENCE}`),
  fc.string({ unit: "binary", maxLength: 200 }),
);

function isNullOrToolName(name: string | null): boolean {
  return name === null || (name.length > 0 && !/\s/.test(name));
}

describe("parsers on arbitrary output", () => {
  it("never throw and return null or a non-empty name without whitespace", () => {
    fc.assert(
      fc.property(modelLikeOutput, (output) => {
        stripReasoning(output);
        return isNullOrToolName(parseToolName(output)) && isNullOrToolName(parseForkToolName(output));
      }),
      { numRuns: 3000 },
    );
  });

  it("never throw on malformed OpenAI tool_calls", () => {
    fc.assert(
      fc.property(fc.anything(), (toolCalls) =>
        isNullOrToolName(toolNameFromOpenAIToolCalls(toolCalls as { function?: { name?: string } }[])),
      ),
    );
  });
});
