import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { ReplyTap } from "../reply-tap.js";
import { BackendUnreachable, forwardTurn } from "./forward.js";

const request = { api: "chat", body: {}, stream: false, streamUsage: false } as const;
const tap = () => new ReplyTap("chat", { onTokens: () => {}, onEnd: () => {} });

describe("forwardTurn", () => {
  it("a kept-alive connection the backend closed is tried again on a new one; a backend that is gone is unreachable", async () => {
    // closes its first connection, unanswered, when a second request comes on it (an idle close racing it)
    let first: object | null = null;
    let requestsOnFirst = 0;
    const backend = createServer((req, res) => {
      first ??= req.socket;
      if (req.socket === first && ++requestsOnFirst === 2) {
        req.socket.destroy();
        return;
      }
      req.resume();
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: "ok" } }] }));
      });
    });
    await new Promise<void>((resolve) => backend.listen(0, "127.0.0.1", resolve));
    const target = {
      name: "b1",
      url: `http://127.0.0.1:${(backend.address() as AddressInfo).port}`,
      modelId: "m",
    };
    try {
      for (let i = 0; i < 4; i++) {
        const reply = await forwardTurn(
          target,
          request,
          { messages: [] },
          tap(),
          new AbortController().signal,
        );
        assert.equal(reply.status, 200, `request ${i}`);
      }
    } finally {
      backend.closeAllConnections();
      await new Promise<void>((resolve) => backend.close(() => resolve()));
    }
    await assert.rejects(
      forwardTurn(target, request, { messages: [] }, tap(), new AbortController().signal),
      (error) => error instanceof BackendUnreachable && /did not answer: ECONNREFUSED/.test(error.message),
    );
  });
});
