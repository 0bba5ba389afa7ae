import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";

/**
 * CORS for `--allowed-origins`. An allowed origin's preflight gets back exactly the headers it asks for, so
 * the official SDKs' own headers (`X-Stainless-*`, `anthropic-version`, `x-api-key`, ...) pass without a
 * list to keep current; any other origin gets no CORS headers at all.
 */
export function allowedOriginsCors(origins: readonly string[]): MiddlewareHandler {
  const anyOrigin = origins.includes("*");
  const reflectingCors = cors({
    origin: anyOrigin ? "*" : [...origins],
    allowMethods: ["GET", "POST", "DELETE", "OPTIONS"],
    exposeHeaders: ["X-Request-Id", "Retry-After"],
    maxAge: 600,
  });
  return (c, next) => {
    const origin = c.req.header("origin");
    if (!anyOrigin && (origin === undefined || !origins.includes(origin))) return next();
    return reflectingCors(c, next);
  };
}
