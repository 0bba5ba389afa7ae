import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { describe, test } from "node:test";
import { PortPicker, parsePortRange } from "./port-range.js";

const HOST = "127.0.0.1";

/** A server holding a port the system picked. */
async function holdAnyPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const address = server.address();
  assert.ok(typeof address === "object" && address);
  return { server, port: address.port };
}

describe("harness-check --port-range", () => {
  test("A-B parses when 1 <= A <= B <= 65535; anything else is refused", () => {
    assert.deepEqual(parsePortRange("9000-9099"), { first: 9000, last: 9099 });
    assert.deepEqual(parsePortRange(" 9000-9000 "), { first: 9000, last: 9000 });
    for (const bad of ["9099-9000", "0-10", "9000", "9000-70000", "a-b", "9000-", "-9000", "9000 - 9099"]) {
      assert.equal(parsePortRange(bad), null, bad);
    }
  });

  test("ports come from the range, each once, skipping one something else holds; then a clear error", async () => {
    const held = await holdAnyPort();
    try {
      const last = Math.min(65535, held.port + 20);
      const picker = new PortPicker(HOST, { first: held.port, last });
      const first = await picker.take();
      const second = await picker.take();
      assert.ok(first > held.port && first <= last, `${first} in ${held.port + 1}-${last}`);
      assert.ok(second > first && second <= last, `${second} after ${first}`);

      const full = new PortPicker(HOST, { first: held.port, last: held.port });
      await assert.rejects(
        full.take(),
        new RegExp(`^Error: --port-range ${held.port}-${held.port}: no free port left on ${HOST}$`),
      );
    } finally {
      held.server.close();
    }
  });

  test("without a range, any free port", async () => {
    const port = await new PortPicker(HOST, null).take();
    assert.ok(port > 0 && port <= 65535);
  });
});
