import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseBackendSpec } from "./backend-spec.js";

describe("--backend", () => {
  it("takes a base URL with the KV size and the KV events endpoint the backend cannot say", () => {
    assert.deepEqual(
      parseBackendSpec("http://10.0.0.1:8000/?kv-tokens=16384&kv-events=tcp://10.0.0.1:5557", 1),
      {
        name: "b2",
        url: "http://10.0.0.1:8000",
        kvTokens: 16384,
        kvEventsEndpoint: "tcp://10.0.0.1:5557",
      },
    );
    assert.equal(parseBackendSpec("https://llm.example/v0", 0).url, "https://llm.example/v0");
  });

  it("names what is wrong", () => {
    assert.throws(() => parseBackendSpec("8000", 0), /not a URL/);
    assert.throws(() => parseBackendSpec("localhost:8000", 0), /only http:\/\/ and https:\/\//);
    assert.throws(() => parseBackendSpec("http://h:1?kv-tokens=0", 0), /kv-tokens must be a positive/);
    assert.throws(
      () => parseBackendSpec("http://h:1?kv-events=h:5557", 0),
      /kv-events must be tcp:\/\/host:port/,
    );
    assert.throws(() => parseBackendSpec("http://h:1?slots=4", 0), /unknown parameter slots/);
  });
});
