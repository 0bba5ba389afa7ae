import { checkTokenIds } from "../generation/token-ids.js";
import type { CompletionBody } from "../schemas.js";

/** One prompt of `/v1/completions`: text, or token ids the engine takes as they are. */
export type CompletionPrompt = string | readonly number[];

/**
 * The prompts of a completion request, in order (one choice each), as OpenAI and vLLM accept them: a
 * string, a list of strings, a list of token ids, or a list of token-id lists. A token id outside the
 * model's vocabulary is a 400 naming it.
 */
export function completionPrompts(prompt: CompletionBody["prompt"], vocabSize: number): CompletionPrompt[] {
  const prompts: CompletionPrompt[] =
    typeof prompt === "string"
      ? [prompt]
      : typeof prompt[0] === "number"
        ? [prompt as number[]]
        : [...(prompt as string[] | number[][])];
  for (const [i, one] of prompts.entries()) {
    if (typeof one === "string") continue;
    checkTokenIds(one, vocabSize, typeof prompt[0] === "number" ? "prompt" : `prompt[${i}]`, "prompt");
  }
  return prompts;
}
