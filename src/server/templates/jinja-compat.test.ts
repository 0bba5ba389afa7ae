import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Template } from "@huggingface/jinja";
import type { ChatMessageInput, ToolInput } from "../schemas.js";
import { TEST_MODEL, TOOL_CONVERSATION } from "../test-support/chat-fixtures.js";
import { llamaTemplate } from "../test-support/llama-templates.js";
import { ChatTemplate } from "./chat-template.js";
import { CompatTemplate } from "./jinja-compat.js";

/** What the library renders `source` as, and what it renders once rewritten (the library's refusal, if any). */
function renders(source: string, context: Record<string, unknown> = {}): { library: string; compat: string } {
  let library: string;
  try {
    library = new Template(source).render(context);
  } catch (error) {
    library = `refused: ${(error as Error).message}`;
  }
  return { library, compat: new CompatTemplate(source).render(context) };
}

describe("Python the library lacks, rewritten", () => {
  test("list.append and list.pop change the list in place", () => {
    const source =
      "{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}{% set _ = ns.ids.append('b') %}" +
      "{% set _ = ns.ids.append('c') %}{{ ns.ids.pop(0) }} {{ ns.ids|length }} {{ ns.ids.pop() }} " +
      "{{ ns.ids|join(',') }}";
    const { library, compat } = renders(source);
    assert.match(library, /^refused: Cannot call something that is not a function/);
    assert.equal(compat, "a 2 c b");
  });

  test("pop from a dict by key; pop past the end is an error, as in Python", () => {
    const { library, compat } = renders(
      "{% set d = {'a': 1, 'b': 2} %}{{ d.pop('a') }} {{ d|length }} {{ d.b }}",
    );
    assert.match(library, /^refused: Cannot call something that is not a function/);
    assert.equal(compat, "1 1 2");
    assert.throws(
      () => new CompatTemplate("{% set l = [] %}{{ l.pop() }}").render(),
      /pop index out of range/,
    );
  });

  test("str.format: automatic, numbered and named fields, Python's str() of each value", () => {
    const source =
      "{{ '<{}|{}|{}|{}>'.format('a', 1, true, none) }} {{ '{1}{0}'.format('x', 'y') }} " +
      "{{ '{name}{{}}'.format(name=[1, 'b']) }}";
    const { library, compat } = renders(source);
    assert.match(library, /^refused:/);
    assert.equal(compat, "<a|1|True|None> yx [1, 'b']{}");
  });

  test("str.format refuses a format spec rather than ignoring it", () => {
    assert.throws(() => new CompatTemplate("{{ '{:>4}'.format(1) }}").render(), /not supported/);
  });

  test("|min and |max, with sort's arguments", () => {
    const source =
      "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A', 'c']|min }} " +
      "{{ (items|max(attribute='n')).name }} {{ (items|min(false, 'n')).name }}";
    const items = [
      { name: "x", n: 2 },
      { name: "y", n: 5 },
      { name: "z", n: 1 },
    ];
    const { library, compat } = renders(source, { items });
    assert.match(library, /^refused: Unknown ArrayValue filter: min/);
    assert.equal(compat, "1 3 A y z");
  });

  test("|string of a dict or list is Python's str(); of anything else what the library writes", () => {
    const { library, compat } = renders("{{ {'a': 1, 'b': [true, none, 1.5], 'c': \"it's\"}|string }}");
    assert.match(library, /^refused: Unknown ObjectValue filter: string/);
    assert.equal(compat, `{'a': 1, 'b': [True, None, 1.5], 'c': "it's"}`);
    // Qwen3-Coder's `<type>` of a nullable parameter, as its model read it in training
    const typeList = renders("<type>{{ t|string }}</type>", { t: ["string", "null"] });
    assert.equal(typeList.library, '<type>["string", "null"]</type>');
    assert.equal(typeList.compat, "<type>['string', 'null']</type>");
    const others = "{{ 5|string }} {{ 2.0|string }} {{ 'x'|string }} {{ true|string }}";
    assert.equal(renders(others).compat, new Template(others).render());
  });

  test("integer dict keys: lookups, and dictsort, items(), keys() and loops give integers back", () => {
    const source =
      "{% set d = {10: 'b', 1: 'a', 2: 'c'} %}" +
      "{% for k, v in d|dictsort %}{{ k + 1 }}{{ v }} {% endfor %}|" +
      "{% for k, v in d.items() %}{{ k }}{% endfor %}|{% for k in d %}{{ k * 2 }} {% endfor %}|" +
      "{{ d.keys()|length }} {{ d[10] }} {{ d.get(2) }} {% if 1 in d %}in{% endif %}";
    const { library, compat } = renders(source);
    assert.match(library, /^refused: Object keys must be strings/);
    assert.equal(compat, "2a 3c 11b |1012|20 2 4 |3 b c in");
  });

  test("a loop unpacks the tuples of a list literal", () => {
    const source = "{% for a, b in [(1, 'x'), (2, 'y')] %}{{ a }}{{ b }}{% endfor %}";
    const { library, compat } = renders(source);
    assert.match(library, /^refused: Cannot unpack non-iterable type: TupleValue/);
    assert.equal(compat, "1x2y");
  });

  test("dict.items(), .keys() and .values() are the dict's methods even where it has a key of that name", () => {
    const source =
      "{% set s = {'type': 'array', 'items': {'type': 'string'}} %}" +
      "{% for k, v in s.items() %}{{ k }} {% endfor %}{{ s.keys()|length }} {{ s.values()|length }} {{ s['items'].type }}";
    const { library, compat } = renders(source);
    assert.match(library, /^refused: Cannot call something that is not a function: got ObjectValue/);
    assert.equal(compat, "type items 2 2 string");
  });

  test("a string times an integer repeats it", () => {
    const { library, compat } = renders("[{{ '-' * 3 }}][{{ 2 * 'ab' }}][{{ 2 * 3 }}][{{ 'x' * 0 }}]");
    assert.match(library, /^refused: Unknown operator "\*" between StringValue and IntegerValue/);
    assert.equal(compat, "[---][abab][6][]");
  });

  test("a template the library renders renders the same", () => {
    const source = llamaTemplate("Qwen-Qwen3-0.6B");
    const context = { messages: [{ role: "user", content: "hi" }], add_generation_prompt: true };
    assert.equal(new CompatTemplate(source).render(context), new Template(source).render(context));
  });
});

// Expected values are what llama.cpp's engine (common/jinja, 3.22.1) renders.
describe("undefined values, taken as llama.cpp's engine takes them", () => {
  const context = { d: { a: 1 } };

  test("a filter of an undefined value is the filter of an empty one", () => {
    const source =
      "[{{ u|trim }}][{{ d.x|upper }}][{{ u|length }}][{% for k, v in d.x|items %}x{% endfor %}]" +
      "[{{ u|join(',') }}][{{ u|map(attribute='a')|list|length }}][{{ u|sort|length }}]";
    const { library, compat } = renders(source, context);
    assert.match(library, /^refused: Cannot apply filter "trim" to type: UndefinedValue/);
    assert.equal(compat, "[][][0][][][0][0]");
  });

  test("its string methods give an empty string, items() an empty list", () => {
    const { library, compat } = renders(
      "[{{ u.strip() }}][{{ d.x.upper() }}][{{ u.items()|length }}]",
      context,
    );
    assert.match(library, /^refused: Cannot call something that is not a function: got UndefinedValue/);
    assert.equal(compat, "[][][0]");
  });

  test("a loop over it runs no times (its else block does)", () => {
    const source = "[{% for x in u %}x{% else %}empty{% endfor %}][{% for x in d.x if x %}x{% endfor %}]";
    const { library, compat } = renders(source, context);
    assert.match(library, /^refused: Expected iterable or object type in for loop: got UndefinedValue/);
    assert.equal(compat, "[empty][]");
  });

  test("a lookup by an undefined key is undefined", () => {
    const { library, compat } = renders(
      "[{{ d[u] is defined }}][{{ d[d.x] is defined }}][{{ d['a'] }}]",
      context,
    );
    assert.match(library, /^refused: Cannot access property with non-string: got UndefinedValue/);
    assert.equal(compat, "[false][false][1]");
  });

  test("it is iterable and a sequence; a dict is not iterable, as llama.cpp has it", () => {
    const source =
      "[{{ u is iterable }}][{{ d.x is not iterable }}][{{ d is iterable }}][{{ 'a' is iterable }}][{{ u is sequence }}]";
    const { library, compat } = renders(source, context);
    assert.equal(library, "[false][true][false][true][false]");
    assert.equal(compat, "[true][false][false][true][true]");
  });

  test("undefined or none beside a string concatenates as an empty string", () => {
    const source =
      "[{{ 'a' + d.x }}][{{ d.x + 'b' }}][{{ 'c' + u }}][{{ u ~ 'd' }}][{{ none ~ 'e' }}][{{ 'f' + none }}]" +
      "[{{ 'g' ~ 1 }}][{{ 'h' + 'i' }}][{{ 'j' + 1.5 }}]";
    const { library, compat } = renders(source, context);
    assert.match(library, /^refused: Cannot perform operation \+ on undefined values/);
    assert.equal(compat, "[a][b][c][d][e][f][g1][hi][j1.5]");
  });

  test("a boolean beside a string is written as Python writes it (GigaChat 3's ' // default: ' ~ default)", () => {
    const { library, compat } = renders(
      "[{{ ' // default: ' ~ d.b }}][{{ true ~ '' }}][{{ 'a' + true }}][{{ 'n' ~ 1.5 }}]",
      { d: { b: false } },
    );
    assert.equal(library, "[ // default: false][true][atrue][n1.5]");
    assert.equal(compat, "[ // default: False][True][aTrue][n1.5]");
  });

  test("a dict or list beside a string is written as Python's str() (Functionary v3.2's '\\n' + arguments)", () => {
    const { library, compat } = renders("{{ '>>>bash\\n' + args }}|{{ 'x' ~ [1, 'a'] }}", {
      args: { command: "ls", n: 2 },
    });
    assert.equal(library, ">>>bash\n[object Map]|x1,a");
    assert.equal(compat, ">>>bash\n{'command': 'ls', 'n': 2}|x[1, 'a']");
  });

  test("but not beside anything else, nor, under +, where a string is indexed by a name (as Python)", () => {
    for (const source of ["{{ 1 + u }}", "{{ u ~ u }}", "{{ u ~ 1 }}", "{{ 'ab'[0]['t'] + 'x' }}"]) {
      assert.throws(() => new CompatTemplate(source).render(context), /on undefined values/, source);
    }
    assert.throws(() => new CompatTemplate("{{ none ~ 1 }}").render(), /on null values/);
  });

  test("an undefined value is in no list (Seed-OSS's py_type of a parameter without a type)", () => {
    const source =
      "{% macro py_type(t) %}{% if t == 'string' %}str{% elif t in ('number', 'integer') %}int" +
      "{% else %}Any{% endif %}{% endmacro %}" +
      "{% for name, spec in params.properties.items() %}{{ name }}: {{ py_type(spec.type) }} {% endfor %}";
    const params = { properties: { path: { type: "string" }, args: { description: "any value" } } };
    const { library, compat } = renders(source, { params });
    assert.match(library, /^refused: Cannot perform operation in on undefined values/);
    assert.equal(compat, "path: str args: Any ");
    // nor in a dict, nor (Python's Jinja) not in one; in a string it is still an error, as in Python
    assert.equal(renders("[{{ u in d }}][{{ u not in [1] }}]", context).compat, "[false][true]");
    assert.throws(() => new CompatTemplate("{{ u in 'abc' }}").render(), /on undefined values/);
  });

  test("none is searched for in a list (GigaChat 3's schema.get('type') of a parameter without a type)", () => {
    const source =
      "{% for key, schema in params.properties.items() %}{% set ty = schema.get('type') %}" +
      "{{ key }}: {% if ty == 'string' %}string{% elif ty in ['number', 'integer'] %}number" +
      "{% else %}any{% endif %}, {% endfor %}[{{ none in [1, none] }}][{{ none in d }}]";
    const params = { properties: { path: { type: "string" }, args: { description: "any value" } } };
    const { library, compat } = renders(source, { ...context, params });
    assert.match(library, /^refused: Cannot perform operation on null values/);
    assert.equal(compat, "path: string, args: any, [true][false]");
    assert.throws(() => new CompatTemplate("{{ none in 'abc' }}").render(), /on null values/);
  });

  test("none under a list filter llama.cpp has for it is an empty list (Functionary v3.1's tools, none)", () => {
    const source =
      "[{{ none|selectattr('type', 'equalto', 'x')|list|length }}][{{ none|items|length }}][{{ [1]|unique|length }}]";
    const { library, compat } = renders(source);
    assert.match(library, /^refused: Cannot apply filter "selectattr" to type: NullValue/);
    assert.equal(compat, "[0][0][1]");
  });
});

// A JSON schema's `type` may be a list (`["integer", "null"]`: a nullable parameter, as Qwen Code sends them).
// Expected values are what llama.cpp's engine renders, or where it refuses, what Python's Jinja renders.
describe("values the library takes as strings only, as Python's Jinja takes them", () => {
  const limit = { type: ["integer", "null"], description: "n" };

  test("|upper, |lower, |title, |capitalize and |trim write a value that is not a string as str() first", () => {
    const source =
      "[{{ limit.type|upper }}][{{ {'a': 'b'}|upper }}][{{ 5|lower }}][{{ none|title }}][{{ true|upper }}]" +
      "[{{ parts|trim }}][{{ 2.5|capitalize }}][{{ u|upper }}][{{ ' x '|trim }}]";
    const parts = [{ type: "text", text: "Fix." }];
    const { library, compat } = renders(source, { limit, parts });
    assert.match(library, /^refused: Unknown ArrayValue filter: upper/);
    assert.equal(
      compat,
      "[['INTEGER', 'NULL']][{'A': 'B'}][5][None][TRUE][[{'type': 'text', 'text': 'Fix.'}]][2.5][][x]",
    );
  });

  test("a list in a list or tuple is searched for by ==, not refused (Seed-OSS's and GigaChat 3's type checks)", () => {
    const source =
      "[{% if limit.type in ('number', 'integer') %}int{% else %}Any{% endif %}]" +
      "[{% if limit.type in ['number', 'integer'] %}number{% else %}any{% endif %}]" +
      "[{{ limit.type in [['integer', 'null']] }}][{{ limit.type not in [['integer']] }}]" +
      "[{{ [{'a': [1]}] in [[{'a': [1.0]}]] }}][{{ 'integer' in limit.type }}]";
    const { library, compat } = renders(source, { limit });
    assert.match(library, /^refused: Unknown operator "in" between ArrayValue and TupleValue/);
    assert.equal(compat, "[Any][any][true][true][true][true]");
    assert.throws(() => new CompatTemplate("{{ [1] in 'abc' }}").render(), /Unknown operator "in"/);
  });

  test("a lookup by a key that is a list is undefined (Hermes 2 Pro's and Command R+'s type map)", () => {
    const source =
      "{% macro py(spec) %}{% set m = {'string': 'str', 'number': 'float', 'integer': 'int'} %}" +
      "{% if m[spec.type] is defined %}{{ m[spec.type] }}{% elif spec.type is iterable %}Union[" +
      "{% for t in spec.type %}{{ py({'type': t}) }}{% if not loop.last %},{% endif %}{% endfor %}]" +
      "{% else %}Any{% endif %}{% endmacro %}{{ py(v) }} {{ py({'type': 'string'}) }}";
    const v = { type: ["string", "number"] };
    const { library, compat } = renders(source, { v });
    assert.match(library, /^refused: Cannot access property with non-string: got ArrayValue/);
    assert.equal(compat, "Union[str,float] str");
    // with "null" in the list the macro loops over the string "null": Python's Jinja recurses without end,
    // llama.cpp refuses the lookup, and the library the loop
    assert.throws(() => new CompatTemplate(source).render({ v: limit }), /got StringValue/);
    const others = "[{{ d[none] is defined }}][{{ d[{'a': 1}] is defined }}][{{ [5, 6][i] }}][{{ d[k] }}]";
    assert.equal(renders(others, { d: { a: 1 }, i: 1, k: "a" }).compat, "[false][false][6][1]");
  });
});

const model = TEST_MODEL;

const tools: ToolInput[] = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "Run a command",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
];

const conversation = TOOL_CONVERSATION;

/** The conversation as the server gives it to a template (arguments as an object). */
const libraryContext = {
  messages: conversation.map((m) =>
    m.role === "assistant"
      ? {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: "a1b2c3d4e", type: "function", function: { name: "bash", arguments: { command: "ls" } } },
          ],
        }
      : m,
  ),
  tools,
  add_generation_prompt: true,
  bos_token: "<s>",
  eos_token: "</s>",
};

/** Each template's own markup of the call and of its result. */
const REAL_TEMPLATES: Record<string, { call: string; result: string }> = {
  "Kimi-K2-Thinking": {
    call: '<|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>{"command": "ls"}<|tool_call_end|>',
    // the id the call was queued under (append), taken back for its result (pop)
    result: "## Return of functions.bash:0\nmain.py<|im_end|>",
  },
  "Kimi-K2-Instruct": {
    call: '<|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>{"command": "ls"}<|tool_call_end|>',
    result: "## Return of functions.bash:0\nmain.py<|im_end|>",
  },
  "ByteDance-Seed-OSS": {
    call: "<seed:tool_call>\n<function=bash>\n<parameter=command>ls</parameter>\n</function>\n</seed:tool_call>",
    result: "<seed:bos>tool\nmain.py<seed:eos>",
  },
  "openbmb-MiniCPM5-1B": {
    call: '<function name="bash"><param name="command">ls</param></function>',
    result: "<tool_response>\nmain.py\n</tool_response>",
  },
  "tencent-Hy3": {
    call:
      "<tool_call:opensource>bash<tool_sep:opensource>\n<arg_key:opensource>command</arg_key:opensource>\n" +
      "<arg_value:opensource>ls</arg_value:opensource>\n</tool_call:opensource>",
    result: "<tool_response:opensource>\nmain.py\n</tool_response:opensource>",
  },
  "Apriel-1.6-15b-Thinker-fixed": {
    call: '<tool_calls>[{"name": "bash", "arguments": {"command": "ls"}, "id": "a1b2c3d4e"}]</tool_calls>',
    result: "<|begin_tool_result|>\nmain.py\n",
  },
  "unsloth-Apriel-1.5": {
    call: '<tool_calls>[{"name": "bash", "arguments": {"command": "ls"}, "id": "a1b2c3d4e"}]</tool_calls>',
    result: "<|tool_result|>\nmain.py\n<|end|>",
  },
};

describe("real templates the library cannot render alone", () => {
  for (const [name, expected] of Object.entries(REAL_TEMPLATES)) {
    test(`${name} renders the tool call and its result`, () => {
      const source = llamaTemplate(name);
      assert.throws(() => new Template(source).render(libraryContext));
      const prompt = new ChatTemplate(source, model).render(conversation, tools);
      assert.ok(prompt.includes(expected.call), prompt);
      assert.ok(prompt.includes(expected.result), prompt);
      assert.ok(prompt.includes("bash") && prompt.includes("Run a command"), "the offered tool");
    });
  }

  test("Apriel's templates write the offered tools with Python's str()", () => {
    for (const name of ["Apriel-1.6-15b-Thinker-fixed", "unsloth-Apriel-1.5"]) {
      const prompt = new ChatTemplate(llamaTemplate(name), model).render(conversation, tools);
      assert.ok(
        prompt.includes("{'type': 'function', 'function': {'name': 'bash', 'description': 'Run a command'"),
      );
    }
  });

  test("Seed-OSS looks its reflection interval up in its integer-keyed budget table", () => {
    const template = new ChatTemplate(llamaTemplate("ByteDance-Seed-OSS"), model);
    const interval = (budget: number) =>
      /reflect on your thinking process every (\d+) tokens/.exec(
        template.render(conversation.slice(0, 2), [], { thinking_budget: budget }),
      )?.[1];
    assert.equal(interval(1000), "256"); // the first gear at or above it: 1024
    assert.equal(interval(3000), "512"); // 4096, in numeric order (not "16384" < "2048")
    assert.equal(interval(50000), "1024"); // past the last gear: budget_reflections_v05[16384]
  });

  test("functionary v3.2 renders its tools' TypeScript definitions (a loop over tuples)", () => {
    const prompt = new ChatTemplate(llamaTemplate("meetkai-functionary-medium-v3.2"), model).render(
      conversation.slice(0, 2),
      tools,
    );
    assert.ok(prompt.includes("// Run a command\ntype bash = (_: {\ncommand: string,\n}) => any;"), prompt);
  });
});

/** What real clients send: a parameter without a description, a tool without parameters, nested schemas. */
const CLIENT_TOOLS: Record<string, ToolInput> = {
  "a parameter without a description": {
    type: "function",
    function: {
      name: "bash",
      description: "Run",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
  "a tool without parameters": { type: "function", function: { name: "bash", description: "Run" } },
  "enum, object and array parameters": {
    type: "function",
    function: {
      name: "bash",
      description: "Run",
      parameters: {
        type: "object",
        properties: {
          mode: { type: "string", enum: ["a", "b"], description: "m" },
          opts: { type: "object", properties: { x: { type: "integer" } }, description: "o" },
          list: { type: "array", items: { type: "string" }, description: "l" },
        },
      },
    },
  },
};

const HERMES_TOOL = {
  "a parameter without a description":
    '"description": "bash(command: str) - Run\n\n    Args:\n        command(str): ", ',
  "a tool without parameters": '"description": "bash() - Run\n\n", "parameters": {}}',
  // `json_spec|items` (a list of pairs) for an array's items: Union[] in llama.cpp and Python too
  "enum, object and array parameters":
    '"description": "bash(mode: str, opts: dict, list: list[Union[]]) - Run\n\n    Args:\n' +
    '        mode(str): m        opts(dict): o        list(list[Union[]]): l", ',
};

/** Each template's writing of each tool; all but the noted one as llama.cpp's engine writes it. */
const CLIENT_TOOL_PROMPTS: Record<string, Record<string, string>> = {
  "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": HERMES_TOOL,
  "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": HERMES_TOOL,
  "CohereForAI-c4ai-command-r-plus-tool_use": {
    "a parameter without a description":
      'def bash(command: str) -> List[Dict]:\n    """Run\n\n    Args:\n        command (str): \n    """',
    "a tool without parameters": 'def bash() -> List[Dict]:\n    """Run\n    """',
    // llama.cpp refuses this one (`json_spec.items` is the dict's method there: "Function has no builtins")
    "enum, object and array parameters":
      "def bash(mode: Optional[str] = None, opts: Optional[Dict[str, Union[]]] = None, " +
      "list: Optional[List[str]] = None) -> List[Dict]:",
  },
};

const GIGACHAT_TOOL =
  'type bash = (_: {\n  // m\n  mode?: "a" | "b",\n  // o\n  opts?: {\n    x?: number,\n  },\n' +
  "  // l\n  list?: string[],\n}) => any;";

describe("real templates given the tools real clients send", () => {
  const asked: ChatMessageInput[] = [
    { role: "system", content: "Fix." },
    { role: "user", content: "Go." },
  ];
  for (const [name, prompts] of Object.entries(CLIENT_TOOL_PROMPTS)) {
    for (const [shape, expected] of Object.entries(prompts)) {
      test(`${name}: ${shape}`, () => {
        const prompt = new ChatTemplate(llamaTemplate(name), model).render(asked, [CLIENT_TOOLS[shape]!]);
        assert.ok(prompt.includes(expected), prompt);
      });
    }
  }

  for (const name of ["GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B"]) {
    test(`${name}: enum, object and array parameters (the array's schema has a key "items")`, () => {
      const tool = CLIENT_TOOLS["enum, object and array parameters"]!;
      const prompt = new ChatTemplate(llamaTemplate(name), model).render(asked, [tool]);
      assert.ok(prompt.includes(GIGACHAT_TOOL), prompt);
    });
  }
});

/** A parameter whose type is a list, and one without a type, as Qwen Code and Claude Code send them. */
function readTool(properties: Record<string, unknown>): ToolInput {
  const parameters = {
    type: "object",
    properties: { path: { type: "string", description: "p" }, ...properties },
  };
  return {
    type: "function",
    function: { name: "read", description: "Read", parameters: { ...parameters, required: ["path"] } },
  };
}
const NULLABLE = readTool({
  limit: { type: ["integer", "null"], description: "n" },
  args: { description: "a" },
  all: { type: "boolean", description: "r", default: false },
});
const UNION = readTool({ v: { type: ["string", "number"], description: "u" } });
const GIGACHAT_TYPE_LIST =
  "  // n\n  limit?: any,\n  // a\n  args?: any,\n  // r\n  all?: boolean, // default: False\n}) => any;";

const HERMES_UNION = '"description": "read(path: str, v: Union[str,float]) - Read';
/** Each template's writing of the tool; where llama.cpp refuses it (noted), as Python's Jinja writes it. */
const TYPE_LIST_PROMPTS: Record<string, [ToolInput, string]> = {
  "google-gemma-4-31B-it": [
    NULLABLE,
    'args:{description:<|"|>a<|"|>,type:<|"|><|"|>},limit:{description:<|"|>n<|"|>,' +
      "type:<|\"|>['INTEGER', 'NULL']<|\"|>},path:",
  ],
  "google-gemma-4-31B-it-interleaved": [
    NULLABLE,
    "limit:{description:<|\"|>n<|\"|>,type:<|\"|>['INTEGER', 'NULL']<|\"|>}",
  ],
  // llama.cpp refuses the list (`ty in [...]`); `args` and `all` (a boolean default: False) as it writes them
  "GigaChat3-10B-A1.8B": [NULLABLE, GIGACHAT_TYPE_LIST],
  "GigaChat3.1-10B-A1.8B": [NULLABLE, GIGACHAT_TYPE_LIST],
  // llama.cpp refuses both (`t in ("number", "integer")`)
  "ByteDance-Seed-OSS": [NULLABLE, "def read(path: str,limit: Any,args: Any,all: bool):"],
  // llama.cpp refuses these (a list as a dict's key)
  "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": [UNION, HERMES_UNION],
  "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": [UNION, HERMES_UNION],
  "CohereForAI-c4ai-command-r-plus-tool_use": [
    UNION,
    "def read(path: str, v: Optional[Union[str,float]] = None) -> List[Dict]:",
  ],
};

describe("real templates given a tool parameter whose type is a list, or none", () => {
  const asked: ChatMessageInput[] = [
    { role: "system", content: "Fix." },
    { role: "user", content: "Go." },
  ];
  for (const [name, [tool, expected]] of Object.entries(TYPE_LIST_PROMPTS)) {
    test(name, () => {
      const prompt = new ChatTemplate(llamaTemplate(name), model).render(asked, [tool]);
      assert.ok(prompt.includes(expected), prompt);
    });
  }

  test("Hermes 2 Pro/3 and Command R+ render a type list with null only without the null (template-polyfills.ts)", () => {
    // their macro loops over the string "null" as a type list: Python's Jinja recurses without end, llama.cpp
    // refuses; the engine refuses it too, and the server renders the tools again with "null" taken out
    for (const name of [
      "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
      "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
      "CohereForAI-c4ai-command-r-plus-tool_use",
    ]) {
      const template = new CompatTemplate(llamaTemplate(name));
      const context = { messages: asked, tools: [NULLABLE], add_generation_prompt: true };
      assert.throws(() => template.render(context), /in for loop: got StringValue/, name);
      assert.ok(new ChatTemplate(llamaTemplate(name), model).render(asked, [NULLABLE]).length > 0, name);
    }
  });
});
