/** Request bodies and OpenAI-format error checks shared by the server's HTTP tests. */
import assert from "node:assert/strict";

export const chat = (extra: Record<string, unknown> = {}) => ({
  model: "fake-model",
  messages: [{ role: "user", content: "hi" }],
  ...extra,
});

export interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export async function expectError(
  response: Response,
  status: number,
  param?: string | null,
): Promise<ErrorJson> {
  assert.equal(response.status, status);
  assert.match(response.headers.get("content-type") ?? "", /application\/json/);
  const body = (await response.json()) as ErrorJson;
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  assert.equal(typeof body.error.message, "string");
  assert.ok(body.error.message.length > 0);
  if (param !== undefined) assert.equal(body.error.param, param);
  return body;
}
