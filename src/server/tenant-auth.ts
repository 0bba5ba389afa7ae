/**
 * The API keys of `/v1/*`, one tenant per key: a request's key (a bearer token, or Anthropic's `x-api-key`)
 * names its tenant (`tenant-1`, `tenant-2`... with two or more keys; null with one), and a request without a
 * known key is refused with 401. No keys: an open server. Shared by `continuum serve` and `continuum gateway`.
 */
import { createHash } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.js";
import type { AppEnv } from "./generation/generation.js";

function digestHex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export function tenantAuth(
  apiKeys: readonly string[] | undefined,
  isOpenPath: (path: string) => boolean,
): MiddlewareHandler<AppEnv> {
  const keys = [...new Set(apiKeys ?? [])].filter((key) => key.length > 0);
  // Looked up by SHA-256 digest: comparing digests leaks nothing useful about a key.
  const tenantOfDigest = new Map(
    keys.map((key, i) => [digestHex(key), keys.length > 1 ? `tenant-${i + 1}` : null]),
  );
  return async (c, next) => {
    if (tenantOfDigest.size === 0 || isOpenPath(c.req.path)) return next();
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    // Anthropic's clients send the key as x-api-key: an equal alternative to the bearer token.
    const key = match?.[1] ?? c.req.header("x-api-key")?.trim();
    const tenant = key ? tenantOfDigest.get(digestHex(key)) : undefined;
    if (tenant === undefined) {
      throw new ApiError(
        401,
        "Incorrect or missing API key (send Authorization: Bearer <key> or x-api-key: <key>).",
        "invalid_request_error",
        "invalid_api_key",
      );
    }
    c.set("tenant", tenant);
    return next();
  };
}
