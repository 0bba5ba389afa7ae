/**
 * `serve --media-inputs note`: images, audio and files in a request's content become a short text note for a
 * model that reads text only, so an agent session that once attached a screenshot (Claude Code's Read of an
 * image, a pasted picture) goes on instead of failing on every later turn that carries it in its history.
 * The note depends only on the part itself, so a program's turns render the same prefix and keep their cache.
 *
 * Rewritten in the raw JSON body, before validation, in the places each API puts content parts.
 */
export type MediaApi = "chat" | "messages" | "responses";

/** The endpoints whose bodies carry content parts, and their API's shapes. */
export const MEDIA_ROUTES: readonly (readonly [string, MediaApi])[] = [
  ["/v1/chat/completions", "chat"],
  ["/v1/messages", "messages"],
  ["/v1/messages/count_tokens", "messages"],
  ["/v1/responses", "responses"],
  ["/v1/conversations", "responses"],
  ["/v1/conversations/:id/items", "responses"],
];

/** A part's media kind by API and type (null: text or anything else, left as it is). */
const MEDIA_TYPES: Record<MediaApi, Readonly<Record<string, string>>> = {
  chat: { image_url: "image", input_audio: "audio", file: "file" },
  messages: { image: "image", document: "document" },
  responses: { input_image: "image", input_audio: "audio", input_file: "file" },
};
const TEXT_TYPE: Record<MediaApi, string> = { chat: "text", messages: "text", responses: "input_text" };

type Json = Record<string, unknown>;

const isObject = (x: unknown): x is Json => typeof x === "object" && x !== null && !Array.isArray(x);
const str = (x: unknown): string | null => (typeof x === "string" && x.length > 0 ? x : null);

/** What the part is, as far as it says without its bytes: a media type, an address, a file name or id. */
function describe(part: Json): string | null {
  const source = isObject(part["source"]) ? part["source"] : null;
  const imageUrl = isObject(part["image_url"]) ? str(part["image_url"]["url"]) : str(part["image_url"]);
  const file = isObject(part["file"]) ? part["file"] : null;
  const audio = isObject(part["input_audio"]) ? part["input_audio"] : null;
  const url = imageUrl ?? (source && str(source["url"]));
  if (url !== null) {
    const data = /^data:([^;,]+)/.exec(url);
    return data ? (data[1] as string) : url.length <= 200 ? url : `${url.slice(0, 200)}...`;
  }
  return (
    (source && str(source["media_type"])) ??
    str(part["filename"]) ??
    (file && (str(file["filename"]) ?? str(file["file_id"]))) ??
    str(part["file_id"]) ??
    (audio && str(audio["format"])) ??
    null
  );
}

/** Why a media part is refused, and the flag that would take it. */
export function refusedMedia(api: MediaApi, type: string): string | null {
  const kind = MEDIA_TYPES[api][type];
  return kind === undefined
    ? null
    : `${kind} content is not supported: the served model reads text only (send text, or start the server with --media-inputs note to have each image, audio clip or file replaced by a note)`;
}

export function mediaNote(kind: string, part: Json): string {
  const what = describe(part);
  return `[${kind}${what === null ? "" : ` (${what})`} not shown: the served model reads text only]`;
}

/** The content array with media parts as text parts; the count replaced goes to `counter`. */
function noteParts(api: MediaApi, parts: unknown, counter: { n: number }): unknown {
  if (!Array.isArray(parts)) return parts;
  return parts.map((part) => {
    if (!isObject(part) || typeof part["type"] !== "string") return part;
    const kind = MEDIA_TYPES[api][part["type"]];
    if (kind !== undefined) {
      counter.n++;
      return { type: TEXT_TYPE[api], text: mediaNote(kind, part) };
    }
    // a Messages tool_result carries its own content blocks
    if (api === "messages" && part["type"] === "tool_result") {
      return { ...part, content: noteParts(api, part["content"], counter) };
    }
    return part;
  });
}

/** Items of a Responses input (or a conversation's items): messages' content and tool outputs. */
function noteItems(items: unknown, counter: { n: number }): unknown {
  if (!Array.isArray(items)) return items;
  return items.map((item) => {
    if (!isObject(item)) return item;
    if ("content" in item) return { ...item, content: noteParts("responses", item["content"], counter) };
    if ("output" in item) return { ...item, output: noteParts("responses", item["output"], counter) };
    return item;
  });
}

/** The body with every media part replaced by its note, and how many were. */
export function noteMedia(api: MediaApi, body: unknown): { body: unknown; replaced: number } {
  const counter = { n: 0 };
  if (!isObject(body)) return { body, replaced: 0 };
  let out: Json = body;
  if (api === "responses") {
    out = { ...body };
    if ("input" in body) out["input"] = noteItems(body["input"], counter);
    if ("items" in body) out["items"] = noteItems(body["items"], counter);
  } else if (Array.isArray(body["messages"])) {
    out = {
      ...body,
      messages: body["messages"].map((m: unknown) =>
        isObject(m) ? { ...m, content: noteParts(api, m["content"], counter) } : m,
      ),
    };
  }
  return { body: out, replaced: counter.n };
}
