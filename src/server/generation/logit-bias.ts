import type { TokenBias } from "../../engine/engine-api.js";
import { ApiError } from "../errors.js";

/**
 * OpenAI's `logit_bias` ({"token id": bias in [-100, 100]}) as the engine takes it; a key that is not a
 * token id of the model is a 400 naming it.
 */
export function logitBias(
  bias: Readonly<Record<string, number>> | null | undefined,
  vocabSize: number,
): TokenBias[] {
  return Object.entries(bias ?? {}).map(([key, value]) => {
    const token = /^\d+$/.test(key) ? Number(key) : Number.NaN;
    if (!(token < vocabSize)) {
      throw ApiError.badRequest(
        `logit_bias key ${JSON.stringify(key)} is not a token id of this model (0 to ${vocabSize - 1})`,
        "logit_bias",
      );
    }
    return { token, bias: value };
  });
}

/** A server-wide bias as `serve --logit-bias` gives it: a token id, or `eos` for the model's end token. */
export interface LogitBiasSpec {
  readonly token: number | "eos";
  readonly bias: number;
}

/**
 * Parses llama.cpp's `--logit-bias` syntax, `TOKEN(+|-)BIAS` (`15043+1.5`, `eos-100`), the bias within
 * OpenAI's [-100, 100]; null when the text is not of that form.
 */
export function parseLogitBiasSpec(text: string): LogitBiasSpec | null {
  const m = /^(\d+|eos)([+-]\d+(?:\.\d+)?)$/.exec(text.trim());
  if (!m) return null;
  const bias = Number(m[2]);
  if (Math.abs(bias) > 100) return null;
  return { token: m[1] === "eos" ? "eos" : Number(m[1]), bias };
}

/** The specs as token ids of the model; throws naming a spec the model has no token for. */
export function resolveLogitBias(
  specs: readonly LogitBiasSpec[],
  vocabSize: number,
  eosTokenId: number | null,
): TokenBias[] {
  return specs.map((spec) => {
    const token = spec.token === "eos" ? eosTokenId : spec.token;
    if (token === null) throw new Error("--logit-bias eos: the model names no end-of-generation token");
    if (!(token < vocabSize)) {
      throw new Error(`--logit-bias ${spec.token}: not a token id of this model (0 to ${vocabSize - 1})`);
    }
    return { token, bias: spec.bias };
  });
}

/** The server's biases with a request's own on top (the request's value wins for the same token). */
export function withRequestBias(defaults: readonly TokenBias[], request: readonly TokenBias[]): TokenBias[] {
  const own = new Set(request.map((b) => b.token));
  return [...defaults.filter((b) => !own.has(b.token)), ...request];
}
