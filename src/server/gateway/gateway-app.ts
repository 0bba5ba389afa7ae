import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Gateway } from "../../gateway/gateway.js";
import { answerErrors, errorResponse, requestIdOf } from "../app-answers.js";
import { ApiError } from "../errors.js";
import { type AppEnv, unixSeconds } from "../generation/generation.js";
import { ConversationPrograms } from "../programs/conversation-programs.js";
import { scopeToTenant } from "../programs/program-identity.js";
import { tenantAuth } from "../tenant-auth.js";
import { type GatewayContext, modelNames } from "./gateway-context.js";
import { gatewayExposition } from "./gateway-metrics.js";
import { gatewayResponsesApi } from "./gateway-responses.js";
import { gatewayChat, gatewayCompletions, gatewayCountTokens, gatewayMessages } from "./gateway-routes.js";

export interface GatewayAppOptions {
  readonly gateway: Gateway;
  readonly apiKeys?: readonly string[];
  readonly servedModelNames?: readonly string[];
  readonly maxBodyBytes?: number;
  /** Retry-After (s) of a 503 while no backend is up (default 2) */
  readonly retryAfterS?: number;
  readonly logError?: (message: string) => void;
}

const OPEN_PATHS = new Set(["/health", "/metrics"]);
const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;
/** Replies of programs whose clients name none, kept to find the program of their next turn. */
const REPLIES_KEPT = 16384;

export function createGatewayApp(options: GatewayAppOptions): Hono<AppEnv> {
  const { gateway } = options;
  const logError = options.logError ?? ((message: string) => process.stderr.write(`${message}\n`));
  const ctx: GatewayContext = {
    gateway,
    servedModelNames: options.servedModelNames ?? [],
    conversations: new ConversationPrograms(REPLIES_KEPT),
    retryAfterS: options.retryAfterS ?? 2,
    newRequestId: requestIdOf,
  };
  const app = new Hono<AppEnv>();
  app.onError(answerErrors("continuum gateway", logError));
  app.notFound((c) =>
    errorResponse(
      c,
      new ApiError(404, `no route for ${c.req.method} ${c.req.path}`, "invalid_request_error", "not_found"),
    ),
  );
  app.use(
    "*",
    tenantAuth(options.apiKeys, (path) => OPEN_PATHS.has(path)),
  );
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => {
        throw new ApiError(
          413,
          `request body is too large (at most ${maxBodyBytes} bytes are accepted)`,
          "invalid_request_error",
          "request_too_large",
        );
      },
    }),
  );
  app.post("/v1/chat/completions", (c) => gatewayChat(c, ctx));
  app.post("/v1/completions", (c) => gatewayCompletions(c, ctx));
  app.post("/v1/messages", (c) => gatewayMessages(c, ctx));
  app.post("/v1/messages/count_tokens", (c) => gatewayCountTokens(c, ctx));
  const responses = gatewayResponsesApi(ctx);
  app.post("/v1/responses", responses.create);
  app.get("/v1/responses/:id", responses.retrieve);
  app.delete("/v1/responses/:id", responses.remove);
  app.get("/v1/responses/:id/input_items", responses.inputItems);
  const modelObject = (id: string) => ({
    id,
    object: "model",
    created: unixSeconds(),
    owned_by: "continuum-gateway",
    max_model_len: Math.min(
      ...gateway.upBackends.map((b) => b.info?.contextTokens ?? Number.POSITIVE_INFINITY),
    ),
  });
  app.get("/v1/models", (c) => c.json({ object: "list", data: modelNames(ctx).map(modelObject) }));
  app.delete("/v1/programs/:id", async (c) => {
    const id = c.req.param("id");
    const programId = scopeToTenant(c.get("tenant") ?? null, id, null).programId as string;
    if (!(await gateway.endProgram(programId))) {
      throw new ApiError(404, `no live program ${JSON.stringify(id)}`, "invalid_request_error", "not_found");
    }
    return c.json({ id, object: "program", deleted: true });
  });
  app.get("/health", (c) => {
    const up = gateway.upBackends.length;
    const backends = gateway.backends.map((b) => ({ name: b.spec.name, url: b.spec.url, state: b.state }));
    return c.json({ status: up > 0 ? "ok" : "no_backend", backends }, up > 0 ? 200 : 503);
  });
  app.get("/metrics", async (c) =>
    c.body(await gatewayExposition(gateway, modelNames(ctx)[0] ?? "unknown"), 200, {
      "Content-Type": "text/plain; version=0.0.4; charset=utf-8",
    }),
  );
  return app;
}
