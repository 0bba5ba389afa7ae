// OpenAI's logprobs and top_logprobs for a sampled token: log-probabilities under the softmax of the model's
// raw row of logits (before temperature, biases, penalties, filters and grammar), as vLLM reports them by
// default.
#pragma once

#include <cstdint>

#include "sampling.h"

namespace continuum {

/** The most top_logprobs a request may ask for (OpenAI's limit). */
constexpr int32_t kMaxTopLogprobs = 20;

/**
 * token's log-probability in the row (-inf when its logit is -inf or NaN), and the topN most likely tokens
 * with theirs into topTokens / topLogprobs, highest first, ties by the lower id (fewer when the row has
 * fewer tokens with a finite logit). Returns how many top entries were written. NaN logits count as -inf.
 */
int32_t rowLogprobs(const float* logits, int32_t nVocab, int32_t token, int32_t topN, SamplingScratch& scratch,
                    float* logprob, int32_t* topTokens, float* topLogprobs);

/**
 * token's rank in the row: 1 + how many tokens have a higher logit (vLLM's rank of a prompt token). Call after
 * rowLogprobs on the same row and scratch: blocks whose maximum is not above the token's logit are skipped.
 */
int32_t tokenRank(const float* logits, int32_t nVocab, int32_t token, const SamplingScratch& scratch);

}  // namespace continuum
