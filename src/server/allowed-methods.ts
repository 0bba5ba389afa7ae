/**
 * The methods a path is served with, from an app's routes, so a request with another method gets 405 with
 * `Allow` instead of a 404 that says the path does not exist. Matched by Hono's own router (the same
 * path syntax as the routes); middleware (method ALL) serves no method of its own.
 */

import { TrieRouter } from "hono/router/trie-router";
import type { RouterRoute } from "hono/types";

/** A function from a path to the methods its routes take (HEAD wherever GET is, as Hono answers it); [] for none. */
export function allowedMethods(routes: readonly RouterRoute[]): (path: string) => string[] {
  const router = new TrieRouter<string>();
  const methods = new Set<string>();
  for (const route of routes) {
    if (route.method === "ALL") continue;
    router.add(route.method, route.path, route.method);
    methods.add(route.method);
  }
  return (path) => {
    const allowed = [...methods].filter((method) => router.match(method, path)[0].length > 0);
    if (allowed.includes("GET")) allowed.push("HEAD");
    return allowed.sort();
  };
}
