/**
 * The ChatML chat template stored in `tokenizer.chat_template`. llama.cpp's built-in template
 * detection recognises it by "<|im_start|>" and renders messages as
 * `<|im_start|>{role}\n{content}<|im_end|>\n` (+ `<|im_start|>assistant\n` as generation prompt); the
 * Jinja text renders plain messages (system, user, assistant, tool) identically, and additionally
 * lists `tools` in the system turn and renders assistant `tool_calls` as <tool_call> JSON blocks.
 */
export const CHATML_TEMPLATE = [
  "{%- if tools -%}",
  "{{- '<|im_start|>system\\n' -}}",
  "{%- if messages and messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\\n\\n' -}}{%- endif -%}",
  "{{- '# Tools\\n\\nYou can call these functions:\\n<tools>' -}}",
  "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}",
  `{{- '\\n</tools>\\n\\nTo call a function, reply with {"name": ..., "arguments": ...} inside <tool_call></tool_call> tags.<|im_end|>\\n' -}}`,
  "{%- endif -%}",
  "{%- for message in messages -%}",
  "{%- if message['role'] == 'system' and loop.first and tools -%}",
  "{%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] -%}",
  "{{- '<|im_start|>assistant\\n' -}}",
  "{%- if message['content'] is string -%}{{- message['content'] -}}{%- endif -%}",
  "{%- for call in message['tool_calls'] -%}",
  "{%- if call['function'] is defined -%}{%- set fn = call['function'] -%}{%- else -%}{%- set fn = call -%}{%- endif -%}",
  "{{- '\\n<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' -}}",
  "{%- if fn['arguments'] is string -%}{{- fn['arguments'] -}}{%- else -%}{{- fn['arguments'] | tojson -}}{%- endif -%}",
  "{{- '}\\n</tool_call>' -}}",
  "{%- endfor -%}",
  "{{- '<|im_end|>\\n' -}}",
  "{%- else -%}",
  "{{- '<|im_start|>' + message['role'] + '\\n' -}}",
  "{%- if message['content'] is string -%}{{- message['content'] -}}{%- endif -%}",
  "{{- '<|im_end|>\\n' -}}",
  "{%- endif -%}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}",
].join("\n");

export interface ChatMessage {
  role: string;
  content: string;
}

/**
 * Renders plain messages the way llama.cpp's built-in ChatML formatter (and the template above, for
 * messages without tool calls) does.
 */
export function renderChatML(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
  let out = "";
  for (const m of messages) out += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
  if (addGenerationPrompt) out += "<|im_start|>assistant\n";
  return out;
}
