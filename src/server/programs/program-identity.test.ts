/** Where a request's program id comes from, on each API, in which precedence; and how a tenant scopes it. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import { ApiError } from "../errors.js";
import {
  PROGRAM_ID_SOURCES,
  type ProgramApi,
  type ProgramIdSource,
  programIdOf,
  scopeToTenant,
} from "./program-identity.js";

const headers =
  (h: Record<string, string>) =>
  (name: string): string | undefined =>
    h[name.toLowerCase()];

const of = (api: ProgramApi, body: object, h: Record<string, string> = {}) =>
  programIdOf(api, body, headers(h));

/** A request of `api` carrying `id` at `source` only. */
function carrying(source: ProgramIdSource, id: string): { body: object; headers: Record<string, string> } {
  if ("header" in source.at) return { body: {}, headers: { [source.at.header]: id } };
  const value = source.form === "claude-user-id" ? JSON.stringify({ device_id: "d", session_id: id }) : id;
  const body = source.at.body.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value) as object;
  return { body, headers: {} };
}

describe("programIdOf", () => {
  test("every source names the program on the APIs it is read on, and only there", () => {
    for (const source of PROGRAM_ID_SOURCES) {
      const request = carrying(source, "p-1");
      for (const api of ["chat", "completions", "messages", "responses"] as const) {
        const named = of(api, request.body, request.headers);
        if (source.apis.includes(api))
          assert.deepEqual(named, { id: "p-1", source: source.name }, source.name);
        else assert.equal(named, null, `${source.name} is not read on ${api}`);
      }
    }
  });

  test("Claude Code: the x-claude-code-session-id header wins; else metadata.user_id's session_id, or the plain id", () => {
    const userId = JSON.stringify({ device_id: "d", session_id: "s-meta" });
    const metadata = { metadata: { user_id: userId } };
    assert.equal(of("messages", metadata, { "x-claude-code-session-id": "s-head" })?.id, "s-head");
    assert.equal(of("messages", metadata)?.id, "s-meta");
    assert.equal(of("messages", { metadata: { user_id: "user_abc" } })?.id, "user_abc");
    assert.equal(of("messages", { metadata: { user_id: JSON.stringify({ device_id: "d" }) } }), null);
    assert.equal(of("messages", { metadata: {} }), null);
    // the Messages body has no OpenAI program fields: serve drops them
    assert.equal(of("messages", { job_id: "j" }), null);
  });

  test("a Codex session is one program: session-id, then thread-id, client_metadata, prompt_cache_key", () => {
    const body = { prompt_cache_key: "key" };
    assert.equal(of("responses", body, { "session-id": "s1", "thread-id": "t1" })?.id, "s1");
    assert.equal(of("responses", body, { "thread-id": "t1" })?.id, "t1");
    assert.equal(of("responses", { ...body, client_metadata: { session_id: "m1" } })?.id, "m1");
    assert.equal(of("responses", body)?.id, "key");
    assert.equal(of("responses", { ...body, conversation: { id: "conv_1" } })?.id, "conv_1");
    assert.equal(of("responses", body, { "x-program-id": "explicit", "session-id": "s1" })?.id, "explicit");
    assert.equal(of("responses", { input: "a" }), null);
  });

  test("a job_id number is its decimal id; blank ids name nothing", () => {
    assert.equal(of("chat", { job_id: 17 })?.id, "17");
    assert.equal(of("chat", { job_id: "  " }, { "x-program-id": " p " })?.id, "p");
    assert.equal(of("chat", { job_id: null }), null);
  });

  test("sources naming different programs are a 400 naming both; an id too long is one naming its source", () => {
    const refused = (
      api: ProgramApi,
      body: object,
      h: Record<string, string>,
      message: RegExp,
      param: string,
    ) =>
      assert.throws(
        () => of(api, body, h),
        (e: unknown) =>
          e instanceof ApiError && e.status === 400 && message.test(e.message) && e.param === param,
      );
    refused(
      "chat",
      { job_id: "a" },
      { "x-program-id": "b" },
      /job_id \("a"\) and X-Program-Id \("b"\)/,
      "program_id",
    );
    refused(
      "messages",
      {},
      { "x-claude-code-session-id": "a", "x-session-id": "b" },
      /x-claude-code-session-id .* X-Session-ID/,
      "program_id",
    );
    refused("responses", {}, { "thread-id": "t".repeat(257) }, /thread-id has 257 characters/, "thread-id");
    // a stand-in that is not used is not read
    assert.equal(of("responses", { prompt_cache_key: "k".repeat(300) }, { "session-id": "s" })?.id, "s");
  });

  test("any sources: agreeing names give the first one's id; a conflict is refused; stand-ins count only alone", () => {
    const sources = PROGRAM_ID_SOURCES.filter((s) => s.apis.includes("responses"));
    fc.assert(
      fc.property(
        fc.array(fc.option(fc.constantFrom("a", "b"), { nil: null }), {
          minLength: sources.length,
          maxLength: sources.length,
        }),
        (ids) => {
          const body: Record<string, unknown> = {};
          const h: Record<string, string> = {};
          for (const [i, source] of sources.entries()) {
            const id = ids[i];
            if (id === null || id === undefined) continue;
            const request = carrying(source, id);
            Object.assign(h, request.headers);
            if ("body" in source.at) {
              const [key, ...rest] = source.at.body as [string, ...string[]];
              body[key] =
                rest.length === 0 ? (request.body as Record<string, unknown>)[key] : { [rest[0]!]: id };
            }
          }
          const given = sources.flatMap((s, i) =>
            ids[i] ? [{ rank: s.rank, id: ids[i], name: s.name }] : [],
          );
          const naming = given.filter((g) => g.rank === "names");
          if (new Set(naming.map((g) => g.id)).size > 1) {
            assert.throws(() => of("responses", body, h), ApiError);
            return;
          }
          const expected = naming[0] ?? given[0] ?? null;
          assert.deepEqual(
            of("responses", body, h),
            expected === null ? null : { id: expected.id, source: expected.name },
          );
        },
      ),
      { seed: 53, numRuns: 500 },
    );
  });
});

test("scopeToTenant: a tenant's program ids and cache salt are its own; an open server keeps ids as sent", () => {
  assert.deepEqual(scopeToTenant(null, "p", null), { programId: "p", cacheSalt: null });
  assert.deepEqual(scopeToTenant("t", "p", null), { programId: "t/p", cacheSalt: "t" });
  assert.deepEqual(scopeToTenant("t", null, "s"), { programId: null, cacheSalt: "t\u0000s" });
  assert.deepEqual(scopeToTenant(null, null, "s"), { programId: null, cacheSalt: "s" });
});
