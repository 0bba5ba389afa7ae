/**
 * OpenAI's Conversations API: a conversation keeps the items of a multi-turn exchange, and
 * `POST /v1/responses` with `conversation` sees them before its input, then adds that input and its output
 * (responses.ts). Create, retrieve, update (metadata) and delete a conversation; add, list, retrieve and delete
 * its items. The conversation's id is the agent program of the responses on it, so a conversation's turns
 * share their pinned KV; deleting the conversation ends the program. Kept in memory, like stored responses.
 */
import type { Context } from "hono";
import { z } from "zod";
import { readJsonBody } from "../chat/chat-completions.js";
import { ApiError } from "../errors.js";
import { type AppEnv, unixSeconds } from "../generation/generation.js";
import { CONVERSATION_ID_HEADER } from "../programs/program-identity.js";
import {
  ConversationStore,
  conversationObject,
  itemsBytes,
  newConversationId,
  type StoredConversation,
} from "./conversation-store.js";
import { inputMessages } from "./responses-input.js";
import { inputItemsOf, itemList, type ListedItem, listItems } from "./responses-items.js";
import type { ResponsesBody } from "./responses-schema.js";

/** How many conversations are kept (least recently used first out)... */
export const STORED_CONVERSATIONS = 1024;
/** ...and in how much memory at most (their items as JSON text)... */
export const STORED_CONVERSATION_BYTES = 256 * 2 ** 20;
/** ...of which one conversation holds at most this much. */
export const MAX_CONVERSATION_BYTES = 64 * 2 ** 20;
/** OpenAI's limit on the items one request adds. */
const MAX_ITEMS_PER_REQUEST = 20;

type Handler = (c: Context<AppEnv>) => Promise<Response>;

// OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512
const metadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((pairs) => Object.keys(pairs).length <= 16, "metadata has at most 16 key-value pairs");

const itemsSchema = z.array(z.object({ type: z.string().optional() }).passthrough());

const createSchema = z.object({
  items: itemsSchema.max(MAX_ITEMS_PER_REQUEST).nullish(),
  metadata: metadataSchema.nullish(),
});
const updateSchema = z.object({ metadata: metadataSchema.nullable() });
const addItemsSchema = z.object({ items: itemsSchema.min(1).max(MAX_ITEMS_PER_REQUEST) });

/** Items as a request gives them, checked as a response's input would be (a 400 names the bad one), with ids. */
function listedItems(items: ResponsesBody["input"]): ListedItem[] {
  inputMessages(items, "items");
  return inputItemsOf(items);
}

/** `param`: the request field that named it, when not its path. */
function conversationNotFound(id: string, param: string | null = null): ApiError {
  return new ApiError(
    404,
    `Conversation with id '${id}' not found (conversations are kept in this server's memory, at most the ${STORED_CONVERSATIONS} most recently used and ${STORED_CONVERSATION_BYTES / 2 ** 20} MiB of them).`,
    "invalid_request_error",
    "not_found",
    param,
  );
}

export interface ConversationsApi {
  readonly create: Handler;
  readonly retrieve: Handler;
  readonly update: Handler;
  readonly remove: Handler;
  readonly addItems: Handler;
  readonly listItems: Handler;
  readonly retrieveItem: Handler;
  readonly removeItem: Handler;
  /** The tenant's conversation with this id, for a response on it; a 404 naming `conversation` when none. */
  find(tenant: string | null, id: string): StoredConversation;
  /** A 400 naming `input` when a response's input would take `conversation` past the size one may hold. */
  checkRoom(conversation: StoredConversation, input: readonly ListedItem[]): void;
  /**
   * Adds a finished response's input and output items to the conversation, if it is still kept (its output
   * too where it takes the conversation past its size: the input was checked before the response ran).
   */
  append(tenant: string | null, id: string, items: readonly ListedItem[]): void;
}

/**
 * The routes of the Conversations API. `endProgram`: releases a deleted conversation's pinned KV (false when
 * it holds none).
 */
export function conversationsApi(
  endProgram: (tenant: string | null, id: string) => boolean,
): ConversationsApi {
  const store = new ConversationStore(
    STORED_CONVERSATIONS,
    STORED_CONVERSATION_BYTES,
    MAX_CONVERSATION_BYTES,
  );
  const tenantOf = (c: Context<AppEnv>) => c.get("tenant") ?? null;
  const found = (c: Context<AppEnv>): StoredConversation => {
    const id = c.req.param("id") as string;
    const conversation = store.get(tenantOf(c), id);
    if (conversation === undefined) throw conversationNotFound(id);
    return conversation;
  };
  const named = (conversation: StoredConversation) => ({ [CONVERSATION_ID_HEADER]: conversation.id });
  /** A request's `items` added, or a 400 naming them when they would not fit the conversation. */
  const addChecked = (tenant: string | null, conversation: StoredConversation, items: ListedItem[]) => {
    const bytes = itemsBytes(items);
    store.checkRoom(conversation, bytes, "items");
    store.add(tenant, conversation, items, bytes);
  };
  const itemOf = (c: Context<AppEnv>, conversation: StoredConversation): number => {
    const itemId = c.req.param("item_id") as string;
    const index = conversation.items.findIndex((item) => item.id === itemId);
    if (index < 0) {
      throw new ApiError(
        404,
        `Item with id '${itemId}' not found in conversation '${conversation.id}'.`,
        "invalid_request_error",
        "not_found",
      );
    }
    return index;
  };

  return {
    async create(c) {
      // every field is optional: an empty POST creates an empty conversation
      const empty = (await c.req.text()).trim() === "";
      const body = createSchema.parse(empty ? {} : await readJsonBody(c));
      const conversation: StoredConversation = {
        id: newConversationId(),
        created_at: unixSeconds(),
        metadata: body.metadata ?? {},
        items: [],
        itemBytes: 0,
      };
      const items = listedItems(body.items ?? []);
      addChecked(tenantOf(c), conversation, items);
      return c.json(conversationObject(conversation), 200, named(conversation));
    },
    async retrieve(c) {
      const conversation = found(c);
      return c.json(conversationObject(conversation), 200, named(conversation));
    },
    async update(c) {
      const conversation = found(c);
      conversation.metadata = updateSchema.parse(await readJsonBody(c)).metadata ?? {};
      store.set(tenantOf(c), conversation.id, conversation);
      return c.json(conversationObject(conversation), 200, named(conversation));
    },
    async remove(c) {
      const conversation = found(c);
      store.delete(tenantOf(c), conversation.id);
      endProgram(tenantOf(c), conversation.id);
      return c.json({ id: conversation.id, object: "conversation.deleted", deleted: true });
    },
    async addItems(c) {
      const conversation = found(c);
      const added = listedItems(addItemsSchema.parse(await readJsonBody(c)).items);
      addChecked(tenantOf(c), conversation, added);
      return c.json(itemList(added, false), 200, named(conversation));
    },
    async listItems(c) {
      const conversation = found(c);
      return c.json(listItems(conversation.items, c.req.query()), 200, named(conversation));
    },
    async retrieveItem(c) {
      const conversation = found(c);
      return c.json(conversation.items[itemOf(c, conversation)], 200, named(conversation));
    },
    async removeItem(c) {
      const conversation = found(c);
      store.removeItem(tenantOf(c), conversation, itemOf(c, conversation));
      return c.json(conversationObject(conversation), 200, named(conversation));
    },
    find(tenant, id) {
      const conversation = store.get(tenant, id);
      if (conversation === undefined) throw conversationNotFound(id, "conversation");
      return conversation;
    },
    checkRoom(conversation, input) {
      store.checkRoom(conversation, itemsBytes(input), "input");
    },
    append(tenant, id, items) {
      const conversation = store.get(tenant, id);
      if (conversation === undefined) return;
      // checked before the response ran: its input fit, and its output is added whole
      store.add(tenant, conversation, items, itemsBytes(items));
    },
  };
}
