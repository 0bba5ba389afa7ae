import { ApiError } from "../errors.js";

/**
 * A request's token ids, each one of this model's (0 to vocabSize - 1); else a 400 naming the first that is
 * not, as `where[i]` (`tokens[1] is 40000, not a token id of this model (0 to 32767)`).
 */
export function checkTokenIds(ids: readonly number[], vocabSize: number, where: string, param: string): void {
  const at = ids.findIndex((id) => id < 0 || id >= vocabSize);
  if (at < 0) return;
  throw ApiError.badRequest(
    `${where}[${at}] is ${ids[at]}, not a token id of this model (0 to ${vocabSize - 1})`,
    param,
  );
}
