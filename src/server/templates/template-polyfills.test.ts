/**
 * What strict templates refuse in the conversations agent harnesses send, rendered all the same: Codex's
 * instructions and developer message (two system messages) then two user messages, Claude Code's system
 * message after the user's.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ChatMessageInput } from "../schemas.js";
import { testTemplate } from "../test-support/chat-fixtures.js";
import { llamaTemplate } from "../test-support/llama-templates.js";
import { withAlternatingRoles, withoutNullTypes } from "./template-polyfills.js";

const codexLike: ChatMessageInput[] = [
  { role: "system", content: "You are Codex." },
  { role: "system", content: "Sandbox: workspace-write." },
  { role: "user", content: "<environment_context>cwd</environment_context>" },
  { role: "user", content: "Fix the test." },
];
const claudeLike: ChatMessageInput[] = [
  { role: "system", content: "You are Claude Code." },
  { role: "user", content: "Reply OK." },
  { role: "system", content: "# Environment\ncwd: /repo" },
];

describe("roles as strict templates take them", () => {
  test("every system message in one at the start, consecutive user messages in one", () => {
    assert.deepEqual(withAlternatingRoles([...codexLike, { role: "assistant", content: "Done." }]), [
      { role: "system", content: "You are Codex.\n\nSandbox: workspace-write." },
      { role: "user", content: "<environment_context>cwd</environment_context>\n\nFix the test." },
      { role: "assistant", content: "Done." },
    ]);
    assert.deepEqual(withAlternatingRoles(claudeLike), [
      { role: "system", content: "You are Claude Code.\n\n# Environment\ncwd: /repo" },
      { role: "user", content: "Reply OK." },
    ]);
  });

  for (const name of [
    "mistralai-Mistral-Nemo-Instruct-2407",
    "Mistral-Small-3.2-24B-Instruct-2506",
    "mistralai-Ministral-3-14B-Reasoning-2512",
    "google-gemma-2-2b-it",
  ]) {
    test(`${name}: Codex's and Claude Code's conversations render, every text in them`, () => {
      const template = testTemplate(llamaTemplate(name));
      for (const conversation of [codexLike, claudeLike]) {
        const prompt = template.render(conversation, []);
        for (const m of conversation)
          assert.ok(prompt.includes(m.content as string), `${m.content}\n${prompt}`);
      }
    });
  }
});

describe("nullable parameters for templates that cannot write them", () => {
  const tools = [
    {
      type: "function" as const,
      function: {
        name: "read_file",
        description: "Read a file",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "The file" },
            limit: { type: ["integer", "null"], description: "Lines at most" },
          },
        },
      },
    },
  ];

  test("null is taken out of type lists, at any depth; tools without one come back as they are", () => {
    const [tool] = withoutNullTypes(tools);
    assert.deepEqual(tool?.function.parameters?.["properties"], {
      path: { type: "string", description: "The file" },
      limit: { type: "integer", description: "Lines at most" },
    });
    const plain = [{ type: "function" as const, function: { name: "ls", parameters: { type: "object" } } }];
    assert.equal(withoutNullTypes(plain), plain);
  });

  for (const name of [
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "CohereForAI-c4ai-command-r-plus-tool_use",
  ]) {
    test(`${name}: a nullable parameter (Qwen Code's tools) renders with its type`, () => {
      const template = testTemplate(llamaTemplate(name));
      const prompt = template.render([{ role: "user", content: "Read a.py." }], tools);
      assert.match(prompt, /limit/);
    });
  }
});
