import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type RowSamplerImpl, type RowSamplerParams, sampleLogits } from "./llama-native.js";
import { FLAT_ROW, PEAKED_ROW, syntheticLogits } from "./logit-rows.js";

// The engine is linux-x64 only; there the addon must have been built by `npm ci` (prepare script).
const supported = process.platform === "linux" && process.arch === "x64";

/**
 * The distribution llama.cpp's chain defines for a row: the logit biases added, then top-k (the k highest
 * logits), then top-p over those (the shortest highest-first prefix whose probability at temperature 1
 * reaches p), then min-p (logits at least the highest + ln(min_p)), then a softmax at the temperature over
 * what is left; at a temperature of 0, the first highest logit.
 */
function expected(row: Float32Array, p: RowSamplerParams): Map<number, number> {
  const penalized =
    ((p.history?.length ?? 0) > 0 && (p.presencePenalty ?? 0) + (p.frequencyPenalty ?? 0) !== 0) ||
    (p.repetitionPenalty ?? 1) !== 1;
  const biased =
    (p.logitBias !== undefined && p.logitBias.length > 0) || p.allowedTokens !== undefined || penalized;
  const logits = Float32Array.from(row);
  for (const { token, bias } of p.logitBias ?? []) logits[token] = (logits[token] as number) + bias;
  const taken = new Map<number, number>();
  for (const token of p.history ?? []) taken.set(token, (taken.get(token) ?? 0) + 1);
  const r = p.repetitionPenalty ?? 1;
  for (const token of new Set([...(p.promptTokens ?? []), ...taken.keys()])) {
    const logit = logits[token] as number;
    logits[token] = logit > 0 ? logit / r : logit * r;
  }
  for (const [token, times] of taken) {
    logits[token] = (logits[token] as number) - (p.presencePenalty ?? 0) - (p.frequencyPenalty ?? 0) * times;
  }
  if (p.allowedTokens !== undefined) {
    const allowed = new Set(p.allowedTokens);
    logits.forEach((_, token) => {
      if (!allowed.has(token)) logits[token] = Number.NEGATIVE_INFINITY;
    });
  }
  let kept = biased ? highestFirst(logits) : sortedOnce(row);
  const top = kept[0]?.logit ?? 0;
  if ((p.temperature ?? 0) <= 0) return new Map([[kept[0]?.token ?? 0, 1]]);
  if (p.topK !== undefined && p.topK > 0) kept = kept.slice(0, p.topK);
  if (p.topP !== undefined && p.topP < 1) {
    const z = kept.reduce((s, c) => s + Math.exp(c.logit - top), 0);
    let cum = 0;
    let cut = kept.length;
    for (let i = 0; i < kept.length && cut === kept.length; i++) {
      cum += Math.exp((kept[i] as { logit: number }).logit - top);
      if (cum >= p.topP * z) cut = i + 1;
    }
    kept = kept.slice(0, cut);
  }
  if (p.minP !== undefined && p.minP > 0)
    kept = kept.filter((c) => c.logit >= top + Math.log(p.minP as number));
  const t = p.temperature as number;
  const z = kept.reduce((s, c) => s + Math.exp((c.logit - top) / t), 0);
  return new Map(kept.map((c) => [c.token, Math.exp((c.logit - top) / t) / z]));
}

/** The parameters for a message, a constraint by its size. */
function paramsLabel(params: RowSamplerParams): string {
  return JSON.stringify(params, (key, value) => (key === "allowedTokens" ? `${value.length} tokens` : value));
}

/** A row's finite logits, highest first (equal ones by token id); kept per row, the sort being slow in JS. */
const sortedRows = new WeakMap<Float32Array, { logit: number; token: number }[]>();
function highestFirst(logits: Float32Array): { logit: number; token: number }[] {
  return Array.from(logits, (logit, token) => ({ logit, token }))
    .filter((c) => c.logit > Number.NEGATIVE_INFINITY)
    .sort((a, b) => b.logit - a.logit || a.token - b.token);
}
function sortedOnce(row: Float32Array): { logit: number; token: number }[] {
  const known = sortedRows.get(row);
  if (known !== undefined) return known;
  const sorted = highestFirst(row);
  sortedRows.set(row, sorted);
  return sorted;
}

/**
 * Draws `draws` tokens and checks them against the expected distribution: nothing outside its support,
 * and every token of probability >= 0.5% within 5 standard errors of it (seeded, so the same every run).
 */
function assertDraws(
  logits: Float32Array,
  params: RowSamplerParams,
  impl: RowSamplerImpl,
  draws = 40_000,
): void {
  const want = expected(logits, params);
  const got = sampleLogits(logits, logits.length, { ...params, seed: 1234 }, draws, impl);
  const counts = new Map<number, number>();
  for (const token of got) {
    assert.ok(want.has(token), `${impl} drew token ${token}, which ${paramsLabel(params)} excludes`);
    counts.set(token, (counts.get(token) ?? 0) + 1);
  }
  for (const [token, prob] of want) {
    if (prob < 0.005) continue;
    const freq = (counts.get(token) ?? 0) / draws;
    const tolerance = 5 * Math.sqrt((prob * (1 - prob)) / draws);
    assert.ok(
      Math.abs(freq - prob) <= tolerance,
      `${impl}, ${paramsLabel(params)}: token ${token} drawn ${freq.toFixed(4)} of the time, expected ${prob.toFixed(4)}`,
    );
  }
}

const SETTINGS: readonly RowSamplerParams[] = [
  { temperature: 1 },
  { temperature: 0.3 },
  { temperature: 1.5, topK: 20 },
  { temperature: 0.7, topP: 0.9 },
  { temperature: 1, minP: 0.05 },
  { temperature: 1.2, topK: 50, topP: 0.8, minP: 0.02 },
  // biases: one token lifted to the top, one of the highest pushed out, two entries for one token adding up
  {
    temperature: 0.8,
    topP: 0.9,
    logitBias: [
      { token: 3, bias: 6 },
      { token: 7, bias: -100 },
      { token: 11, bias: 1 },
      { token: 11, bias: 1.5 },
    ],
  },
  { temperature: 0, logitBias: [{ token: 5, bias: 7 }] },
  // penalties on tokens taken before: among them some of the highest (the order is a row's, below)
  {
    temperature: 1,
    topK: 30,
    presencePenalty: 0.8,
    frequencyPenalty: 0.4,
    history: [3, 3, 7, 11, 11, 11, 200],
  },
  // the repetition penalty on the prompt's tokens and the output's, alike
  {
    temperature: 0.9,
    topP: 0.9,
    repetitionPenalty: 1.4,
    promptTokens: Int32Array.from([3, 7, 40, 41]),
    history: [3, 11, 11],
  },
];

describe("sampling a row of logits", {
  skip: supported ? false : "llama.cpp engine is linux-x64 only",
}, () => {
  test("ours draws each token with the probability llama.cpp's samplers give it, and llama.cpp's too", () => {
    // 600 tokens, 40 of them well above the rest: the filters cut through the raised ones
    const logits = syntheticLogits(600, { sigma: 1, peaks: 40, lift: 4, seed: 1 });
    for (const params of SETTINGS) {
      assertDraws(logits, params, "continuum");
      assertDraws(logits, params, "llama.cpp", 10_000);
    }
  });

  test("at Llama 3's vocabulary, with a peaked row and a flat one", () => {
    // 128,256 tokens: many blocks, the cut found by bisection; a flat row puts top-p's cut deep in it
    for (const [logits, draws] of [
      [syntheticLogits(128_256, PEAKED_ROW), 3000],
      [syntheticLogits(128_256, FLAT_ROW), 600],
    ] as const) {
      for (const params of SETTINGS) assertDraws(logits, params, "continuum", draws);
    }
  });

  test("top-p alone under a constraint at a position the model is sure of: drawn by ours, the same distribution", () => {
    // a background of 128,256 tokens around 0 and five far above it, the second refused: one window of the
    // highest logits bounds top-p's cut (the rest hold 0.03% of the probability), so ours draws itself
    const logits = syntheticLogits(128_256, { sigma: 0.5, peaks: 0, lift: 0, seed: 8 });
    const high = [20, 19.5, 19, 18, 17];
    high.forEach((logit, i) => {
      logits[1000 * (i + 1)] = logit;
    });
    const allowedTokens = Array.from(logits.keys()).filter((t) => t !== 2000);
    for (const params of [
      { temperature: 0.8, topP: 0.9 },
      { temperature: 1.5, topP: 0.97, minP: 0.1 },
    ]) {
      assertDraws(logits, { ...params, allowedTokens }, "continuum", 20_000);
    }
  });

  test("under a constraint (a grammar's stand-in), the constrained distribution", () => {
    // the three highest logits refused, two of the next few allowed, then every other one from the 20th
    // down: greedy and the walks (top-k, min-p) must look past the refused ones, a temperature alone has
    // first draws refused and resampled, and a first draw kept under a cut set without the constraint
    // (llama-server's way) would be drawn too often
    const logits = syntheticLogits(600, { sigma: 1, peaks: 40, lift: 4, seed: 5 });
    const order = Array.from(logits.keys()).sort((a, b) => (logits[b] as number) - (logits[a] as number));
    const allowedTokens = [order[3], order[5], ...order.slice(20).filter((_, i) => i % 2 === 0)] as number[];
    for (const params of [...SETTINGS, { temperature: 0 }]) {
      const constrained = { ...params, allowedTokens };
      assertDraws(logits, constrained, "continuum", 20_000);
      assertDraws(logits, constrained, "llama.cpp", 5_000);
    }
  });

  test("penalties: a token taken loses presence_penalty once and frequency_penalty each time; repetition divides", () => {
    // token 2 leads token 4 by 1.0
    const logits = new Float32Array(8).fill(-5);
    logits[2] = 3;
    logits[4] = 2;
    const greedy = (params: RowSamplerParams, impl: RowSamplerImpl) =>
      sampleLogits(logits, 8, { temperature: 0, ...params }, 1, impl)[0];
    for (const impl of ["continuum", "llama.cpp"] as const) {
      assert.equal(greedy({ presencePenalty: 1.5 }, impl), 2, "nothing taken: nothing penalized");
      assert.equal(greedy({ presencePenalty: 1.5, history: [2] }, impl), 4);
      assert.equal(greedy({ presencePenalty: 0.9, history: [2, 2, 2] }, impl), 2, "presence counts once");
      assert.equal(greedy({ frequencyPenalty: 0.6, history: [2] }, impl), 2);
      assert.equal(greedy({ frequencyPenalty: 0.6, history: [2, 2] }, impl), 4, "frequency counts each time");
      assert.equal(greedy({ frequencyPenalty: -2, history: [4] }, impl), 4, "a negative penalty favours it");
      // repetition: 3 / 2 < 2 whether the token is in the prompt or the output; 1.4 leaves it on top
      assert.equal(greedy({ repetitionPenalty: 2, promptTokens: Int32Array.from([2]) }, impl), 4);
      assert.equal(greedy({ repetitionPenalty: 2, history: [2, 2, 2] }, impl), 4);
      assert.equal(greedy({ repetitionPenalty: 1.4, history: [2] }, impl), 2);
    }
    // below zero it multiplies: -1 x 2 < -1.5
    const negative = new Float32Array(8).fill(-5);
    negative[2] = -1;
    negative[4] = -1.5;
    for (const impl of ["continuum", "llama.cpp"] as const) {
      const params = { temperature: 0, repetitionPenalty: 2, promptTokens: Int32Array.from([2]) };
      assert.equal(sampleLogits(negative, 8, params, 1, impl)[0], 4);
    }
  });

  test("ties at a cut, excluded tokens and a single finite logit", () => {
    // 300 equal logits: top-k 10 keeps exactly ten of them, each drawn alike
    const flat = new Float32Array(300).fill(0.5);
    const kept = new Set(sampleLogits(flat, 300, { temperature: 1, topK: 10, seed: 5 }, 5000, "continuum"));
    assert.equal(kept.size, 10);
    // -inf logits are never drawn; a row with one finite logit always draws it
    const one = new Float32Array(1000).fill(Number.NEGATIVE_INFINITY);
    one[613] = -3;
    const draws = sampleLogits(one, 1000, { temperature: 2, topP: 0.5, seed: 9 }, 200, "continuum");
    assert.deepEqual(new Set(draws), new Set([613]));
  });

  test("a seed draws the same tokens again; another seed draws others", () => {
    const logits = syntheticLogits(4096, { sigma: 1, peaks: 64, lift: 3, seed: 4 });
    const draw = (seed: number) =>
      Array.from(sampleLogits(logits, 4096, { temperature: 1, topP: 0.95, seed }, 64, "continuum"));
    assert.deepEqual(draw(42), draw(42));
    assert.notDeepEqual(draw(42), draw(43));
  });

  test("rows are validated", () => {
    const logits = new Float32Array(10);
    assert.throws(() => sampleLogits(logits, 3, { temperature: 1 }, 1, "continuum"), /whole rows/);
    assert.throws(
      () => sampleLogits(logits, 10, { temperature: 1, logitBias: [{ token: 10, bias: 1 }] }, 1, "continuum"),
      /logitBias token out of range/,
    );
    assert.throws(
      () => sampleLogits(logits, 10, { temperature: 1 }, 1, "other" as RowSamplerImpl),
      /sampler/,
    );
  });
});
