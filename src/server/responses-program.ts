import { ApiError } from "./errors.js";
import { programFields } from "./program-fields.js";
import { conversationIdOf, type ResponsesBody } from "./responses-schema.js";
import { type ChatCompletionBody, MAX_ID_CHARS } from "./schemas.js";

type HeaderReader = (name: string) => string | undefined;

/**
 * Where a Responses client names its conversation, in precedence order: `conversation` (a conversation of
 * the Conversations API), then Codex's: the `session-id` header, the `thread-id` header, the body's
 * `client_metadata.session_id`, then `prompt_cache_key`. The first one given is the request's program id,
 * so every turn of one conversation or Codex session is one agent program. They only stand in when no usual
 * source names a program (`job_id`, `program_id`, `session_id`, `X-Program-Id`, `X-Session-ID`:
 * programFields), and never conflict with each other.
 */
function conversationId(body: ResponsesBody, header: HeaderReader): [string, string] | null {
  const sources: [string, string | null | undefined][] = [
    ["conversation", conversationIdOf(body.conversation)],
    ["session-id", header("session-id")],
    ["thread-id", header("thread-id")],
    ["client_metadata.session_id", body.client_metadata?.session_id],
    ["prompt_cache_key", body.prompt_cache_key],
  ];
  for (const [source, value] of sources) {
    const id = value?.trim();
    if (id) return [source, id];
  }
  return null;
}

/** `chat` with the program id of its conversation, when no usual source names one. */
export function withConversationProgramId(
  chat: ChatCompletionBody,
  body: ResponsesBody,
  header: HeaderReader,
): ChatCompletionBody {
  if (programFields(chat, header).programId !== null) return chat;
  const conversation = conversationId(body, header);
  if (conversation === null) return chat;
  const [source, id] = conversation;
  if (id.length > MAX_ID_CHARS) {
    throw ApiError.badRequest(
      `${source} has ${id.length} characters; program ids may have at most ${MAX_ID_CHARS}`,
      source,
    );
  }
  return { ...chat, program_id: id };
}
