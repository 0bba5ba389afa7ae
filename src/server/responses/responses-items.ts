/**
 * The input items of a stored response, as `GET /v1/responses/{id}/input_items` lists them: each with an
 * id (the one the client gave it, else one given when it was stored) and in OpenAI's item shapes, then
 * paged by item id (`after`, `before`), `limit` and `order`.
 */
import { z } from "zod";
import { ApiError } from "../errors.js";
import { newItemId, outputText } from "./responses-output.js";
import {
  customToolCallItemSchema,
  customToolCallOutputItemSchema,
  functionCallItemSchema,
  functionCallOutputItemSchema,
  messageItemSchema,
  type ResponsesBody,
} from "./responses-schema.js";

/** An item as listed: its id and type, and the fields of its type. */
export interface ListedItem {
  readonly id: string;
  readonly type: string;
}

type InputItemBody = Exclude<ResponsesBody["input"], string>[number];
type MessageContent = ReturnType<typeof messageItemSchema.parse>["content"];

/** The id the client gave an item, else a new one. */
function itemId(item: InputItemBody, prefix: Parameters<typeof newItemId>[0]): string {
  const given = (item as { id?: unknown }).id;
  return typeof given === "string" && given.length > 0 ? given : newItemId(prefix);
}

/** A message's content as parts: `input_text` ones, or an assistant's `output_text` ones. */
function contentParts(content: MessageContent, assistant: boolean) {
  const texts = typeof content === "string" ? [content] : content.map((part) => part.text ?? "");
  return texts.map((text) => (assistant ? outputText(text) : { type: "input_text" as const, text }));
}

/** A call's tool name, with its namespace when it has one. */
function calledName(
  name: string,
  namespace: string | null | undefined,
): { name: string; namespace?: string } {
  return namespace ? { name, namespace } : { name };
}

/** One input item with its id, as OpenAI lists it (the request was checked before: every item is known). */
function listedItem(item: InputItemBody): ListedItem {
  const type = item.type ?? "message";
  if (type === "message") {
    const { role, content } = messageItemSchema.parse(item);
    const parts = contentParts(content, role === "assistant");
    return { id: itemId(item, "msg"), type, role, status: "completed", content: parts } as ListedItem;
  }
  if (type === "function_call") {
    const { call_id, name, namespace, arguments: args } = functionCallItemSchema.parse(item);
    const id = itemId(item, "fc");
    return {
      id,
      type,
      call_id,
      ...calledName(name, namespace),
      arguments: args,
      status: "completed",
    } as ListedItem;
  }
  if (type === "function_call_output") {
    const { call_id, output } = functionCallOutputItemSchema.parse(item);
    return { id: itemId(item, "fco"), type, call_id, output, status: "completed" } as ListedItem;
  }
  if (type === "custom_tool_call") {
    const { call_id, name, namespace, input } = customToolCallItemSchema.parse(item);
    const id = itemId(item, "ctc");
    return { id, type, call_id, ...calledName(name, namespace), input, status: "completed" } as ListedItem;
  }
  if (type === "custom_tool_call_output") {
    const { call_id, output } = customToolCallOutputItemSchema.parse(item);
    return { id: itemId(item, "ctco"), type, call_id, output } as ListedItem;
  }
  // a reasoning item, as it was given
  return { summary: [], ...item, id: itemId(item, "rs"), type } as ListedItem;
}

/** A request's input as items with ids: a string is one user message. */
export function inputItemsOf(input: ResponsesBody["input"]): ListedItem[] {
  if (typeof input === "string") return [listedItem({ type: "message", role: "user", content: input })];
  return input.map(listedItem);
}

const listQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).optional(),
  order: z.enum(["asc", "desc"]).optional(),
  after: z.string().min(1).optional(),
  before: z.string().min(1).optional(),
});
/** The query parameters of a listing, as given (others, such as `include`, are ignored). */
export type ListQuery = Partial<Record<"limit" | "order" | "after" | "before", string>>;

/** A page of items: OpenAI's list object. */
export interface ItemList {
  readonly object: "list";
  readonly data: readonly ListedItem[];
  readonly first_id: string | null;
  readonly last_id: string | null;
  readonly has_more: boolean;
}

/**
 * A page of `items` (oldest first): `order` desc (the default) lists the newest first; `after` / `before`
 * an item id of the listing, whose items after / before it are paged; at most `limit` (1-100, default 20).
 */
export function listItems(items: readonly ListedItem[], query: ListQuery): ItemList {
  const { limit = 20, order = "desc", after, before } = listQuerySchema.parse(query);
  const ordered = order === "asc" ? items : [...items].reverse();
  const indexOf = (id: string, param: string) => {
    const index = ordered.findIndex((item) => item.id === id);
    if (index < 0) throw ApiError.badRequest(`${param}: no input item has the id '${id}'`, param);
    return index;
  };
  const start = after === undefined ? 0 : indexOf(after, "after") + 1;
  const end = before === undefined ? ordered.length : indexOf(before, "before");
  const data = ordered.slice(start, Math.max(start, end)).slice(0, limit);
  return itemList(data, start + data.length < end);
}

/** OpenAI's list object over `data`, which `hasMore` says is not the last page. */
export function itemList(data: readonly ListedItem[], hasMore: boolean): ItemList {
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: hasMore,
  };
}
