/**
 * HostClient's other end, run inside a network namespace: one JSON request a line on stdin
 * (`{id, url, method, headers, body}`), one JSON answer a line on stdout (`{id, status, text}` or
 * `{id, error}`), requests served concurrently.
 */
import { createInterface } from "node:readline";

createInterface({ input: process.stdin }).on("line", (line) => {
  const { id, url, method, headers, body } = JSON.parse(line) as {
    id: number;
    url: string;
    method: string;
    headers?: Record<string, string>;
    body?: string;
  };
  fetch(url, { method, ...(headers ? { headers } : {}), ...(body === undefined ? {} : { body }) })
    .then(async (response) => ({ id, status: response.status, text: await response.text() }))
    .catch((error: unknown) => ({ id, error: error instanceof Error ? error.message : String(error) }))
    .then((answer) => process.stdout.write(`${JSON.stringify(answer)}\n`));
});
