/**
 * What template tests share: the model fields a template is rendered with (`<s>`/`</s>`, a tokenizer that
 * adds BOS itself) and a turn that called a tool and got its result back.
 */
import type { ModelChatTemplate } from "../../engine/engine-api.js";
import type { ChatMessageInput, ToolInput } from "../schemas.js";
import { ChatTemplate } from "../templates/chat-template.js";

export const TEST_MODEL: ModelChatTemplate = {
  source: null,
  bosToken: "<s>",
  eosToken: "</s>",
  eosTokenId: 2,
  addsBos: true,
};

/** A template's source rendered with TEST_MODEL's special tokens. */
export const testTemplate = (source: string) => new ChatTemplate(source, TEST_MODEL);

/** A tool that runs a shell command. */
export const BASH_TOOL: ToolInput = {
  type: "function",
  function: {
    name: "bash",
    description: "Run a command",
    parameters: {
      type: "object",
      properties: { command: { type: "string", description: "The command" } },
      required: ["command"],
    },
  },
};

/** A turn that called a tool and got its result back; ids are Mistral's 9 alphanumerics. */
export const TOOL_CONVERSATION: ChatMessageInput[] = [
  { role: "system", content: "Fix the bug." },
  { role: "user", content: "List the files." },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "a1b2c3d4e", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } },
    ],
  },
  { role: "tool", tool_call_id: "a1b2c3d4e", content: "main.py" },
];
