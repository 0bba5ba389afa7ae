/**
 * The OpenAI-compatible HTTP API over an EngineService: chat and text completions (JSON or SSE),
 * models, tokenize / detokenize, health and Prometheus metrics. Every error leaves through one
 * handler as OpenAI's error body.
 */
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { EngineService } from "../engine/engine-api.js";
import { allowedMethods } from "./allowed-methods.js";
import { answerErrors, errorResponse, requestIdOf } from "./app-answers.js";
import { chatCompletions, type RequestContext } from "./chat/chat-completions.js";
import { completions } from "./chat/completions.js";
import { detokenize, tokenize } from "./chat/tokenize.js";
import { allowedOriginsCors } from "./cors-policy.js";
import { ApiError } from "./errors.js";
import { type AppEnv, InflightRequests, unixSeconds } from "./generation/generation.js";
import { type LogitBiasSpec, resolveLogitBias } from "./generation/logit-bias.js";
import { countMessageTokens, messages } from "./messages/messages.js";
import { AnswerCounter } from "./observability/answer-counts.js";
import { DASHBOARD_ASSET_PREFIX, registerDashboard } from "./observability/dashboard.js";
import { DashboardHistory } from "./observability/dashboard-history.js";
import { ServerMetrics } from "./observability/metrics.js";
import type { ThinkTags } from "./output/reasoning.js";
import type { ToolCallFormat } from "./output/tool-call-formats.js";
import { PROGRAM_API_PATHS, PROGRAM_PATH_PREFIX, scopeToTenant } from "./programs/program-identity.js";
import { TurnPrograms } from "./programs/turn-programs.js";
import { conversationsApi } from "./responses/conversations.js";
import { responsesApi } from "./responses/responses.js";
import { serverChatTemplate, serverToolUseTemplate } from "./templates/chat-template.js";
import { GeneratedReplies } from "./templates/generated-replies.js";
import { MEDIA_ROUTES } from "./templates/media-notes.js";
import { tenantAuth } from "./tenant-auth.js";

export interface AppOptions {
  readonly engine: EngineService;
  /**
   * Bearer tokens accepted on /v1/*, one per tenant (none: open). With two or more, each key is a tenant
   * of its own: program ids and cached KV never cross tenants.
   */
  readonly apiKeys?: readonly string[];
  /** browser origins allowed to call the API (CORS, as vLLM's --allowed-origins); "*": any; none: no CORS */
  readonly allowedOrigins?: readonly string[];
  /** extra names clients may use for the model (the engine's id is always served) */
  readonly servedModelNames?: readonly string[];
  /** serve `/dashboard` and `/dashboard/state` (default true; `--no-dashboard`) */
  readonly dashboard?: boolean;
  /** the scheduling policy's name, shown on the dashboard */
  readonly policyName?: string;
  /** Jinja chat template replacing the model's own (`--chat-template`) */
  readonly chatTemplate?: string;
  /**
   * `auto` (default): a model whose template writes `<think>` blocks has its thinking reported apart from
   * its answer on chat completions (`reasoning_content`, llama-server's default); `none`: left in the content
   */
  readonly reasoningFormat?: "auto" | "none";
  /** largest accepted request body (default 32 MiB) */
  readonly maxBodyBytes?: number;
  /** requests in flight beyond which new ones get 429 (default: no limit; the engine may still refuse) */
  readonly maxInflightRequests?: number | null;
  /** Retry-After (s) sent with the server's own 429 and 503 (default 1) */
  readonly retryAfterS?: number;
  /**
   * biases every request samples with unless its `logit_bias` names the same token (`serve --logit-bias`,
   * llama.cpp's flag), e.g. `eos+8` to make a model end its replies sooner
   */
  readonly logitBias?: readonly LogitBiasSpec[];
  /**
   * images, audio and files in content: refused with a 400 (default), or each replaced by a text note for a
   * model that reads text only (media-notes.ts)
   */
  readonly mediaInputs?: "refuse" | "note";
  /** where unexpected (500) errors are reported; default stderr */
  readonly logError?: (message: string) => void;
}

/** What the banner says of the chat template. */
export interface ChatTemplateSummary {
  /** `--chat-template`, not the model's own */
  readonly overridden: boolean;
  readonly toolCalls: ToolCallFormat;
  readonly thinkTags: ThinkTags | null;
  /** requests with tools render with the model's own `tool_use` template */
  readonly toolUse: boolean;
}

export interface ContinuumApp {
  readonly app: Hono<AppEnv>;
  readonly metrics: ServerMetrics;
  readonly inflight: InflightRequests;
  /** chat completions report the model's thinking as `reasoning_content` (its template thinks; `reasoningFormat`) */
  readonly splitsReasoning: boolean;
  /** how chat requests are rendered and read, for the banner; null: the engine's own (built-in models) */
  readonly chatTemplate: ChatTemplateSummary | null;
  /** From now on, new requests get 503 (a graceful shutdown is under way). */
  startDraining(): void;
  readonly draining: boolean;
  /**
   * From now on only turns of programs already here are served (the engine refuses new programs), and
   * /health says "draining" so balancers place new programs elsewhere.
   */
  startDrainingPrograms(): void;
  readonly drainingPrograms: boolean;
}

// The dashboard page holds no data (it asks for a key when its state endpoint wants one).
const OPEN_PATHS = new Set(["/health", "/metrics", "/dashboard"]);
const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;
/** Replies with tool calls kept to render them back as generated (a few KB each). */
const GENERATED_REPLIES_KEPT = 4096;
/** Ids of programs whose turns offer tools, kept to tell their side requests from their turns. */
const PROGRAMS_WITH_TOOLS_KEPT = 16384;

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

const isOpenPath = (path: string) => OPEN_PATHS.has(path) || path.startsWith(DASHBOARD_ASSET_PREFIX);

const SERVER_VERSION: string = createRequire(import.meta.url)("../../package.json").version;

/** OpenAI's `system_fingerprint`: what answers, here the server's version, the model and its KV setup. */
function systemFingerprint(engine: EngineService): string {
  const config = `continuum ${SERVER_VERSION}\n${engine.modelId}\n${engine.kvSummary}`;
  return `fp_${digest(config).toString("hex").slice(0, 10)}`;
}

/** An error in the shape of the API the path belongs to (Anthropic's on the Messages routes, else OpenAI's). */
/** `POST /v1/responses/{id}/cancel` */
const CANCEL_PATH = /^\/v1\/responses\/[^/]+\/cancel$/;

export function createApp(options: AppOptions): ContinuumApp {
  const { engine } = options;
  const metrics = new ServerMetrics(engine);
  const inflight = new InflightRequests();
  const retryAfterS = options.retryAfterS ?? 1;
  const modelNames = [
    engine.modelId,
    ...(options.servedModelNames ?? []).filter((n) => n !== engine.modelId),
  ];
  const logError = options.logError ?? ((message: string) => process.stderr.write(`${message}\n`));
  let draining = false;
  let drainingPrograms = false;

  const chatTemplate = serverChatTemplate(engine.chatTemplate, options.chatTemplate ?? null);
  const toolUseTemplate = serverToolUseTemplate(engine.chatTemplate, options.chatTemplate ?? null);
  const ctx: RequestContext = {
    engine,
    metrics,
    modelNames,
    chatTemplate,
    toolUseTemplate,
    splitsReasoning: options.reasoningFormat !== "none",
    systemFingerprint: systemFingerprint(engine),
    generatedReplies: new GeneratedReplies(GENERATED_REPLIES_KEPT),
    turnPrograms: new TurnPrograms(PROGRAMS_WITH_TOOLS_KEPT, (programId, requestId) =>
      engine.markSideRequest(programId, requestId),
    ),
    defaultLogitBias: resolveLogitBias(
      options.logitBias ?? [],
      engine.vocabSize,
      engine.chatTemplate.eosTokenId,
    ),
    newRequestId: requestIdOf,
  };

  const app = new Hono<AppEnv>();

  app.onError(answerErrors("continuum server", logError));
  // a path served with other methods is a 405 naming them (the routes are all registered by then); a route
  // of this method that finds nothing (an unknown dashboard asset) is a 404
  let methodsOf: ((path: string) => string[]) | null = null;
  app.notFound((c) => {
    methodsOf ??= allowedMethods(app.routes);
    const allowed = methodsOf(c.req.path);
    if (allowed.length === 0 || allowed.includes(c.req.method)) {
      const message = `no route for ${c.req.method} ${c.req.path}`;
      return errorResponse(c, new ApiError(404, message, "invalid_request_error", "not_found"));
    }
    c.header("Allow", allowed.join(", "));
    const message = `${c.req.method} is not allowed on ${c.req.path}; it takes ${allowed.join(", ")}`;
    return errorResponse(c, new ApiError(405, message, "invalid_request_error", "method_not_allowed"));
  });

  const answers = new AnswerCounter();
  app.use("/v1/*", async (c, next) => {
    await next();
    answers.observe(c.res.status);
  });

  const origins = options.allowedOrigins ?? [];
  if (origins.length > 0) {
    // Before authentication: a browser's preflight carries no Authorization header.
    app.use("*", allowedOriginsCors(origins));
  }

  app.use("*", tenantAuth(options.apiKeys, isOpenPath));

  // Admission: a draining server and a full one say so before reading the body.
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const admit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: () => {
      throw new ApiError(
        413,
        `request body is too large (at most ${maxBodyBytes} bytes are accepted)`,
        "invalid_request_error",
        "request_too_large",
      );
    },
  });
  app.use("/v1/*", async (c, next) => {
    // a cancel frees what the cap and a drain wait for: it is never refused for them
    if (c.req.method !== "POST" || CANCEL_PATH.test(c.req.path)) return next();
    if (draining) {
      throw new ApiError(
        503,
        "the server is shutting down",
        "service_unavailable_error",
        "shutting_down",
        null,
        retryAfterS,
      );
    }
    const cap = options.maxInflightRequests;
    if (cap !== null && cap !== undefined && inflight.size >= cap) {
      metrics.observeRejected("overloaded");
      throw new ApiError(
        429,
        `the server is at capacity (${cap} requests in flight)`,
        "rate_limit_error",
        "overloaded",
        null,
        retryAfterS,
      );
    }
    // In flight until the response is sent (or the client is gone), not merely until it is built.
    const exchange = inflight.begin();
    c.set("exchange", exchange);
    const outgoing = c.env?.outgoing;
    if (outgoing) outgoing.once("close", () => inflight.end(exchange));
    try {
      await admit(c, next);
    } finally {
      if (!outgoing) inflight.end(exchange);
    }
  });

  if (options.mediaInputs === "note") {
    for (const [path, api] of MEDIA_ROUTES) {
      app.use(path, async (c, next) => {
        c.set("notesMedia", api);
        await next();
      });
    }
  }

  app.post(PROGRAM_API_PATHS.chat, (c) => chatCompletions(c, ctx));
  app.post(PROGRAM_API_PATHS.completions, (c) => completions(c, ctx));
  app.post(PROGRAM_API_PATHS.messages, (c) => messages(c, ctx));
  app.post("/v1/messages/count_tokens", (c) => countMessageTokens(c, ctx));
  /** Releases a program's pinned KV now; false when it holds none. */
  const endProgram = (tenant: string | null, id: string) =>
    engine.endProgram(scopeToTenant(tenant, id, null).programId as string);
  const conversations = conversationsApi(endProgram);
  app.post("/v1/conversations", conversations.create);
  app.get("/v1/conversations/:id", conversations.retrieve);
  app.post("/v1/conversations/:id", conversations.update);
  app.delete("/v1/conversations/:id", conversations.remove);
  app.post("/v1/conversations/:id/items", conversations.addItems);
  app.get("/v1/conversations/:id/items", conversations.listItems);
  app.get("/v1/conversations/:id/items/:item_id", conversations.retrieveItem);
  app.delete("/v1/conversations/:id/items/:item_id", conversations.removeItem);
  const responses = responsesApi(ctx, logError, inflight, conversations);
  app.post(PROGRAM_API_PATHS.responses, responses.create);
  app.get("/v1/responses/:id", responses.retrieve);
  app.delete("/v1/responses/:id", responses.remove);
  app.post("/v1/responses/:id/cancel", responses.cancel);
  app.get("/v1/responses/:id/input_items", responses.inputItems);
  // vLLM's and llama-server's tokenizer routes, beside /v1 as theirs are
  app.post("/tokenize", admit, (c) => tokenize(c, ctx));
  app.post("/detokenize", admit, (c) => detokenize(c, ctx));
  const modelObject = (id: string) => ({
    id,
    object: "model",
    created: unixSeconds(),
    owned_by: "continuum",
    root: engine.modelId,
    parent: null,
    max_model_len: engine.maxContextTokens,
  });
  app.get("/v1/models", (c) => c.json({ object: "list", data: modelNames.map(modelObject) }));
  app.get("/v1/models/:id{.+}", (c) => {
    const id = c.req.param("id");
    if (!modelNames.includes(id)) {
      throw new ApiError(
        404,
        `The model ${JSON.stringify(id)} does not exist; this server serves ${modelNames.map((n) => JSON.stringify(n)).join(", ")}`,
        "invalid_request_error",
        "model_not_found",
        "model",
      );
    }
    return c.json(modelObject(id));
  });
  // A router's finish-session: the program's pinned KV is released now, not when its TTL runs out.
  app.delete(`${PROGRAM_PATH_PREFIX}:id`, (c) => {
    const id = c.req.param("id");
    if (!endProgram(c.get("tenant") ?? null, id)) {
      throw new ApiError(404, `no live program ${JSON.stringify(id)}`, "invalid_request_error", "not_found");
    }
    return c.json({ id, object: "program", deleted: true });
  });
  app.get("/health", (c) => {
    if (draining) return c.body(null, 503);
    return drainingPrograms ? c.json({ status: "draining" }, 503) : c.body(null, 200);
  });
  app.get("/metrics", async (c) => {
    const text = await metrics.exposition();
    return c.body(text, 200, { "Content-Type": metrics.contentType });
  });
  const history = options.dashboard === false ? null : new DashboardHistory(engine);
  if (history) {
    metrics.doneListeners.push((done) => history.observeDone(done));
    history.start();
    registerDashboard(app, engine, history, answers, {
      version: SERVER_VERSION,
      policy: options.policyName ?? null,
    });
  }

  return {
    app,
    metrics,
    inflight,
    splitsReasoning:
      ctx.splitsReasoning && (chatTemplate?.thinks === true || toolUseTemplate?.thinks === true),
    chatTemplate:
      chatTemplate === null
        ? null
        : {
            overridden: options.chatTemplate !== undefined,
            toolCalls: chatTemplate.format,
            thinkTags: chatTemplate.thinkTags,
            toolUse: toolUseTemplate !== null,
          },
    startDraining() {
      draining = true;
      history?.stop();
    },
    get draining() {
      return draining;
    },
    startDrainingPrograms() {
      drainingPrograms = true;
      engine.drainPrograms();
    },
    get drainingPrograms() {
      return drainingPrograms;
    },
  };
}
