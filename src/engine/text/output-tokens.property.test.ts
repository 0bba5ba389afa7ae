/**
 * A generated token's logprobs and id go out with its text (fast-check): whatever the tokens' bytes
 * (characters split across tokens), stop strings and ending, a stream's deltas carry exactly the tokens
 * whose text they have streamed so far, each once and in order, and the end hands out every sampled
 * token's (a stop string's, the end-of-generation token's), one entry per token; the first delta carries
 * the prompt's ids.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import { type ActiveRequest, pushDelta } from "../active-request.js";
import type { GenerateEvent, OutputLogprob } from "../engine-api.js";
import { OutputText } from "./output-text.js";
import { OutputTokens } from "./output-tokens.js";

const ALPHABET = ["a", "b", " ", "<", "/", ">", "é", "€", "😀"];

/** The text's UTF-8 bytes cut at the given points (characters may be split across tokens). */
const tokensArb = fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 24 }).chain((chars) => {
  const bytes = Buffer.from(chars.join(""), "utf8");
  if (bytes.length < 2) return fc.constant<Uint8Array[]>([new Uint8Array(bytes)]);
  return fc
    .uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: Math.max(0, bytes.length - 1) })
    .map((cuts) => {
      const points = [0, ...cuts.sort((x, y) => x - y), bytes.length];
      return points.slice(1).map((end, i) => new Uint8Array(bytes.subarray(points[i]!, end)));
    });
});

const stopsArb = fc.array(
  fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 3 }).map((c) => c.join("")),
  { maxLength: 2 },
);

const PROMPT = [7, 8, 9];

/** The executor's sequence for each sampled token (llama-executor onSample), on a request that asked for logprobs and ids. */
function generate(tokens: readonly Uint8Array[], stops: readonly string[], eos: boolean) {
  const events: GenerateEvent[] = [];
  const active = {
    output: new OutputText(stops),
    logprobs: new OutputTokens<OutputLogprob>(),
    tokenIds: new OutputTokens<number>(),
    request: { promptTokens: PROMPT.length },
    content: { tokenAt: (pos: number) => PROMPT[pos], length: PROMPT.length },
    promptIdsOut: false,
    promptUsageOut: false,
    channel: { push: (e: GenerateEvent) => events.push(e) } as unknown as ActiveRequest["channel"],
  } as ActiveRequest;
  const entry = (bytes: Uint8Array, i: number): OutputLogprob => ({ bytes, logprob: -i, top: [] });
  const starts: number[] = [];
  const snapshots: { emitted: string; released: number }[] = [];
  let released = 0;
  const record = () => {
    for (const e of events.splice(0)) {
      if (e.type === "delta") released += e.logprobs?.length ?? 0;
      delivered.push(e);
    }
    snapshots.push({ emitted: active.output.emittedText, released });
  };
  const delivered: GenerateEvent[] = [];
  let stopped = false;
  for (const [i, bytes] of tokens.entries()) {
    starts.push(active.output.text.length);
    active.logprobs!.add(entry(bytes, i), active.output.text.length);
    active.tokenIds!.add(i, active.output.text.length);
    const pushed = active.output.push(bytes);
    pushDelta(active, pushed.delta, pushed.stopped);
    record();
    if (pushed.stopped) {
      stopped = true;
      break;
    }
  }
  if (!stopped) {
    if (eos) {
      active.logprobs!.add(entry(new Uint8Array(0), tokens.length), active.output.text.length);
      active.tokenIds!.add(tokens.length, active.output.text.length);
    }
    pushDelta(active, active.output.finish(), true);
    record();
  }
  return { active, delivered, starts, snapshots, stopped };
}

describe("logprobs follow their text", () => {
  test("each delta carries the tokens it streams, once and in order; the end carries the rest", () => {
    fc.assert(
      fc.property(tokensArb, stopsArb, fc.boolean(), (tokens, stops, eos) => {
        const { active, delivered, starts, snapshots, stopped } = generate(tokens, stops, eos);
        const deltas = delivered.filter((e) => e.type === "delta");
        const text = active.output.text;
        assert.equal(deltas.map((e) => e.text).join(""), text);
        const handedOut = deltas.flatMap((e) => e.logprobs ?? []);
        // each once, in order: the first k of the tokens added
        assert.deepEqual(
          handedOut.map((e) => e.logprob),
          handedOut.map((_, i) => -i),
        );
        assert.deepEqual(handedOut, active.logprobs!.handedOut);
        // the ids go with the same deltas as the logprobs; the prompt's with the first delta only
        for (const delta of deltas) {
          assert.deepEqual(
            delta.tokenIds ?? [],
            (delta.logprobs ?? []).map((e) => -e.logprob),
          );
        }
        assert.deepEqual(
          deltas.map((e) => e.promptTokenIds),
          deltas.map((_, i) => (i === 0 ? PROMPT : undefined)),
        );
        // before the end: the tokens whose text begins before what was streamed, and their bytes start
        // with the streamed text's
        for (const { emitted, released } of snapshots.slice(0, -1)) {
          assert.equal(released, starts.filter((s) => s < emitted.length).length);
          const bytes = Buffer.concat(handedOut.slice(0, released).map((e) => e.bytes));
          assert.ok(bytes.subarray(0, Buffer.byteLength(emitted)).equals(Buffer.from(emitted, "utf8")));
        }
        // the end: one entry per sampled token, whose bytes begin with the text's (a stop string's follow)
        assert.equal(handedOut.length, starts.length + (!stopped && eos ? 1 : 0));
        const all = Buffer.concat(handedOut.map((e) => e.bytes));
        assert.ok(all.subarray(0, Buffer.byteLength(text)).equals(Buffer.from(text, "utf8")));
      }),
      { numRuns: 500 },
    );
  });
});
