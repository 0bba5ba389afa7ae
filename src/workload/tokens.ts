/**
 * Characters per token, measured on the SWE-agent-LM-32B runs that `swe-agent-lm32b.jsonl` comes from.
 * Importers estimate every token count from characters with this one ratio, so counts from different
 * sources stay comparable to that trace.
 */
export const CHARS_PER_TOKEN = 4.13;

export function tokensFromChars(chars: number): number {
  return Math.round(chars / CHARS_PER_TOKEN);
}
