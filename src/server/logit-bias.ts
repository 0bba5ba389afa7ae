import type { TokenBias } from "../engine/engine-api.js";
import { ApiError } from "./errors.js";

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
