import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { ReplyTap } from "../reply-tap.js";
import { BackendUnreachable, forwardTurn } from "./forward.js";

const request = { api: "chat", body: {}, stream: false, streamUsage: false } as const;
const streamed = { ...request, stream: true } as const;
const tap = () => new ReplyTap("chat", { onTokens: () => {}, onEnd: () => {} });

describe("forwardTurn", () => {
  it("a turn whose kept-alive connections the backend all closed is sent again on a new one, a stream read whole; a backend that is gone is unreachable", async () => {
    // the first phase's requests open two kept-alive connections; in the second every one of them is closed,
    // unanswered, as a request comes on it (idle closes racing the requests), and a new connection streams
    const firstPhase = new Set<object>();
    let closing = false;
    const backend = createServer((req, res) => {
      if (closing && firstPhase.has(req.socket)) {
        req.socket.destroy();
        return;
      }
      if (!closing) firstPhase.add(req.socket);
      req.resume();
      req.on("end", () => {
        if (!closing) {
          // answered late, so the two requests of the first phase need two connections
          setTimeout(() => {
            res.setHeader("content-type", "application/json");
            res.end(
              JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: "ok" } }] }),
            );
          }, 50);
          return;
        }
        res.setHeader("content-type", "text/event-stream");
        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "o" } }] })}\n\n`);
        setTimeout(() => {
          res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "k" } }] })}\n\n`);
          res.end("data: [DONE]\n\n");
        }, 100);
      });
    });
    await new Promise<void>((resolve) => backend.listen(0, "127.0.0.1", resolve));
    const target = {
      name: "b1",
      url: `http://127.0.0.1:${(backend.address() as AddressInfo).port}`,
      modelId: "m",
    };
    const send = (req: typeof request | typeof streamed) =>
      forwardTurn(target, req, { messages: [] }, tap(), new AbortController().signal);
    try {
      const first = await Promise.all([send(request), send(request)]);
      assert.deepEqual(
        first.map((reply) => reply.status),
        [200, 200],
      );
      assert.equal(firstPhase.size, 2, "the first phase opened two connections");
      closing = true;
      const reply = await send(streamed);
      assert.equal(reply.kind, "sse");
      const frames: string[] = [];
      if (reply.kind === "sse") for await (const frame of reply.frames) frames.push(frame.data);
      assert.equal(frames.length, 3, `frames: ${frames.join(" | ")}`);
      assert.equal(frames.at(-1), "[DONE]");
    } finally {
      backend.closeAllConnections();
      await new Promise<void>((resolve) => backend.close(() => resolve()));
    }
    await assert.rejects(
      send(request),
      (error) => error instanceof BackendUnreachable && /did not answer: ECONNREFUSED/.test(error.message),
    );
  });
});
