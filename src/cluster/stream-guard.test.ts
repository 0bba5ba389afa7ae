import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { streamGuard } from "./stream-guard.js";

const SOCKET = `\0continuum-stream-guard-test-${process.pid}`;

const frame = (data: object) => `data: ${JSON.stringify(data)}\n\n`;
const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

/** What the "replica" behind HAProxy's stream frontend sends, by path; `?cut` dies after two frames. */
function upstream(): Server {
  return createServer((req, res) => {
    const [path, query] = (req.url ?? "").split("?") as [string, string | undefined];
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      if (path === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ echo: body, program: req.headers["x-program-id"] }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      const frames =
        path === "/v1/chat/completions"
          ? [frame({ n: 1 }), frame({ n: 2 })]
          : [event("a", { sequence_number: 0 }), event("b", { sequence_number: 1 })];
      res.write(frames[0]);
      setTimeout(() => {
        // the second frame and half of a third in one write, as a socket may deliver them
        res.write(`${frames[1]}data: {"unfinis`);
        setTimeout(
          () => (query === "cut" ? res.socket?.destroy() : res.end('hed": true}\n\ndata: [DONE]\n\n')),
          30,
        );
      }, 30);
    });
  });
}

describe("streamGuard", () => {
  const replica = upstream();
  const guard = streamGuard(SOCKET);
  const front = createServer((req, res) => guard.handle(req, res));
  let url = "";
  before(async () => {
    await new Promise<void>((done) => replica.listen(SOCKET, done));
    await new Promise<void>((done) => front.listen(0, "127.0.0.1", done));
    url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  });
  after(async () => {
    guard.close();
    await new Promise((done) => front.close(done));
    await new Promise((done) => replica.close(done));
  });

  const post = (path: string) =>
    fetch(`${url}${path}`, {
      method: "POST",
      body: '{"stream":true}',
      headers: { "content-type": "application/json" },
    });

  test("a whole stream is relayed as it was sent", async () => {
    const response = await post("/v1/chat/completions");
    assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
    assert.equal(
      await response.text(),
      `${frame({ n: 1 })}${frame({ n: 2 })}data: {"unfinished": true}\n\ndata: [DONE]\n\n`,
    );
  });

  test("a cut chat stream drops the partial frame and ends with an OpenAI error and [DONE]", async () => {
    const text = await (await post("/v1/chat/completions?cut")).text();
    const frames = text.split("\n\n").filter(Boolean);
    assert.deepEqual(frames.slice(0, 2), [frame({ n: 1 }).trim(), frame({ n: 2 }).trim()]);
    const error = JSON.parse((frames[2] as string).slice("data: ".length));
    assert.equal(error.error.code, "replica_lost");
    assert.equal(error.error.type, "server_error");
    assert.equal(frames[3], "data: [DONE]");
    assert.equal(frames.length, 4);
  });

  test("a cut Messages stream ends with Anthropic's error event", async () => {
    const text = await (await post("/v1/messages?cut")).text();
    const last = text.split("\n\n").filter(Boolean).at(-1) as string;
    const [kind, data] = last.split("\n") as [string, string];
    assert.equal(kind, "event: error");
    assert.deepEqual(JSON.parse(data.slice("data: ".length)).error.type, "api_error");
    assert.equal(text.split("\n\n").filter(Boolean).length, 3);
  });

  test("a cut Responses stream ends with an error event numbered after the last one", async () => {
    const text = await (await post("/v1/responses?cut")).text();
    const last = text.split("\n\n").filter(Boolean).at(-1) as string;
    const [kind, data] = last.split("\n") as [string, string];
    assert.equal(kind, "event: error");
    const error = JSON.parse(data.slice("data: ".length));
    assert.equal(error.type, "error");
    assert.equal(error.sequence_number, 2);
    assert.equal(error.code, "replica_lost");
  });

  test("other answers pass through with the request's headers and body", async () => {
    const response = await fetch(`${url}/v1/models`, {
      method: "POST",
      body: "hello",
      headers: { "x-program-id": "agent-1" },
    });
    assert.deepEqual(await response.json(), { echo: "hello", program: "agent-1" });
  });
});
