import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chatTurns } from "../templates/chat-render.js";
import { recipientCallMarkers } from "./recipient-formats.js";
import {
  bashTool,
  type CallMarkers,
  parseToolCalls,
  parseTruncatedToolCall,
  ToolCallStreamGate,
  type ToolSpec,
} from "./tool-calls.js";

const weather: ToolSpec = {
  name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } },
};
const bash: ToolSpec = {
  name: "bash",
  parameters: { type: "object", properties: { command: { type: "string" } } },
};
const tools = [weather, bash];

function calls(output: string, offered: readonly ToolSpec[] = tools) {
  const parsed = parseToolCalls(output, offered);
  return parsed && { start: parsed.start, calls: parsed.calls.map((c) => [c.name, JSON.parse(c.arguments)]) };
}

describe("tool-call arguments", () => {
  test("Hermes/Qwen blocks: JSON (object or string arguments), several calls, unclosed last block", () => {
    const out =
      'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n' +
      '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\", \\"days\\": 2}"}';
    assert.deepEqual(calls(out), {
      start: 10,
      calls: [
        ["get_weather", { city: "Oslo" }],
        ["get_weather", { city: "Rome", days: 2 }],
      ],
    });
  });

  test("Hermes with raw newlines inside the command string still parses", () => {
    const out =
      '<tool_call>\n{"name": "bash", "arguments": {"command": "cat <<EOF > a.py\nprint(1)\nEOF"}}\n</tool_call>';
    assert.deepEqual(calls(out)?.calls, [["bash", { command: "cat <<EOF > a.py\nprint(1)\nEOF" }]]);
  });

  test("Qwen3-Coder XML parameters are typed by the tool's schema", () => {
    const out =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Jose\n</parameter>\n" +
      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    assert.deepEqual(calls(out)?.calls, [["get_weather", { city: "San Jose", days: 3 }]]);
  });

  test("calls inside <think> reasoning do not count", () => {
    const thinking =
      '<think>maybe <tool_call>{"name": "bash", "arguments": {"command": "rm -rf /"}}</tool_call></think>';
    assert.equal(calls(`${thinking}No tool needed.`), null);
    const real = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>';
    assert.deepEqual(calls(thinking + real), {
      start: thinking.length,
      calls: [["bash", { command: "ls" }]],
    });
  });

  test("Llama 3: python tag with JSON or a call, plain JSON, pythonic list", () => {
    assert.deepEqual(calls('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Lima"}}'), {
      start: 0,
      calls: [["get_weather", { city: "Lima" }]],
    });
    assert.deepEqual(calls('<|python_tag|>get_weather(city="Quito", days=2)')?.calls, [
      ["get_weather", { city: "Quito", days: 2 }],
    ]);
    assert.deepEqual(
      calls('{"type": "function", "name": "get_weather", "parameters": {"city": "Bern"}}')?.calls,
      [["get_weather", { city: "Bern" }]],
    );
    assert.deepEqual(calls(' [get_weather(city="Oslo"), bash(command="ls -l")]')?.calls, [
      ["get_weather", { city: "Oslo" }],
      ["bash", { command: "ls -l" }],
    ]);
  });

  test("untagged formats only count for offered tools; JSON data is not a call", () => {
    assert.equal(calls('{"name": "Alice", "age": 3}'), null);
    assert.equal(calls('{"name": "launch_rockets", "parameters": {}}'), null);
    assert.equal(calls("[launch(x=1)]"), null);
    assert.equal(calls("[1, 2, 3]"), null);
  });

  test("a single ```bash block maps onto the bash-like tool's command parameter", () => {
    const out = "THOUGHT: run tests\n\n```bash\ncd /testbed && pytest -x\n```";
    assert.deepEqual(calls(out), { start: 20, calls: [["bash", { command: "cd /testbed && pytest -x" }]] });
    assert.equal(calls(out, [weather]), null, "no bash-like tool offered");
    assert.equal(calls("```bash\nls\n```\n```bash\npwd\n```"), null, "two blocks are not one action");
    assert.equal(calls("```bash\n# just a comment\n```"), null);
  });

  test("bash-like tools are recognised by name or by a command parameter", () => {
    assert.deepEqual(bashTool([weather, bash]), { name: "bash", param: "command" });
    const shell = { name: "execute_shell_command", parameters: { properties: { cmd: { type: "string" } } } };
    assert.deepEqual(bashTool([shell]), { name: "execute_shell_command", param: "cmd" });
    assert.equal(bashTool([weather]), null);
  });
});

describe("ToolCallStreamGate", () => {
  function stream(
    pieces: readonly string[],
    offered: readonly ToolSpec[] = tools,
    own?: CallMarkers,
  ): string {
    const gate = new ToolCallStreamGate(offered, own);
    return pieces.map((p) => gate.push(p)).join("");
  }

  test("streams plain text, holds back from a (possibly split) call marker", () => {
    assert.equal(stream(["Hello ", "world"]), "Hello world");
    assert.equal(stream(["Let me ", "check <tool", '_call>{"name"']), "Let me check ");
    assert.equal(stream(["abc <|python", "_tag|>f()"]), "abc ");
    assert.equal(stream(["x ``", "`bash\nls"]), "x ");
    assert.equal(
      stream(["x ```bash\nls"], [weather]),
      "x ```bash\nls",
      "fences only matter with a bash tool",
    );
  });

  test("an answer opening with JSON or a list is held entirely, also after reasoning", () => {
    assert.equal(stream(['  {"name": "bash"', "}"]), "");
    assert.equal(stream(["[get_weather(", ")]"]), "");
    assert.equal(stream(["<think>hm</think>", '\n{"name"']), "<think>hm</think>");
    assert.equal(stream(["<think>hm</think>", "\nSunny."]), "<think>hm</think>\nSunny.");
  });

  test("an answer opening with a message's recipient is held until it opens as text, then up to a message", () => {
    // Muse Glimmer's output read as text (its thinking not split): its messages' headers stay in it
    const recipients = recipientCallMarkers("muse-glimmer");
    assert.equal(stream([" to=", "bash<|message|>", "<atem:function_calls>"], tools, recipients), "");
    assert.equal(
      stream([" to=us", "er<|message|>Hi", " there<|e", "om|><|start|>assistant to=bash"], tools, recipients),
      " to=user<|message|>Hi there",
    );
  });
});

describe("chat rendering", () => {
  test("tools go into the system turn; assistant calls and tool results are rendered", () => {
    const turns = chatTurns(
      [
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
        },
        {
          role: "assistant",
          content: "On it.",
          tool_calls: [
            { id: "1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } },
          ],
        },
        { role: "tool", tool_call_id: "1", content: "a.py" },
        { role: "developer", content: "be brief" },
      ],
      [{ type: "function", function: { name: "bash", parameters: { type: "object" } } }],
    );
    assert.equal(turns.length, 5);
    assert.equal(turns[0]!.role, "system");
    assert.match(
      turns[0]!.content,
      /^# Tools\n\nYou can call these functions:\n<tools>\n\{"type":"function",/,
    );
    assert.deepEqual(turns[1], { role: "user", content: "ab" });
    assert.equal(
      turns[2]!.content,
      'On it.\n<tool_call>\n{"name": "bash", "arguments": {"command":"ls"}}\n</tool_call>',
    );
    assert.deepEqual(turns[3], { role: "tool", content: "a.py" });
    assert.deepEqual(turns[4], { role: "system", content: "be brief" });
  });
});

describe("a forced call cut off at any length", () => {
  test("every prefix of a Hermes call, from its first character, is a call with no content before it", () => {
    const call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    for (let end = 1; end <= call.length; end++) {
      const parsed = parseTruncatedToolCall(call.slice(0, end), [weather]);
      assert.equal(parsed?.start, 0, JSON.stringify(call.slice(0, end)));
      assert.equal(parsed.calls[0]!.name, "get_weather");
    }
  });

  test("text that only looks like the tag's start somewhere inside is not a call", () => {
    assert.equal(parseTruncatedToolCall("a <tool", [weather]), null);
    assert.equal(parseTruncatedToolCall("<b>", [weather]), null);
  });
});
