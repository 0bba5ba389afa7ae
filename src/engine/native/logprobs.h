// OpenAI's logprobs and top_logprobs for a sampled token: log-probabilities under the softmax of the model's
// raw row of logits (before temperature, biases, penalties, filters and grammar), as vLLM reports them by
// default.
#pragma once

#include <cstdint>
#include <vector>

namespace continuum {

/** The most top_logprobs a request may ask for (OpenAI's limit). */
constexpr int32_t kMaxTopLogprobs = 20;

/** Working memory reused across rows on one thread. */
struct LogprobScratch {
  std::vector<float> weights;
  std::vector<float> blockMax;
  std::vector<double> blockSums;
};

/**
 * token's log-probability in the row (-inf when its logit is -inf or NaN), and the topN most likely tokens
 * with theirs into topTokens / topLogprobs, highest first, ties by the lower id (fewer when the row has
 * fewer tokens with a finite logit). Returns how many top entries were written. NaN logits count as -inf.
 */
int32_t rowLogprobs(const float* logits, int32_t nVocab, int32_t token, int32_t topN, LogprobScratch& scratch,
                    float* logprob, int32_t* topTokens, float* topLogprobs);

}  // namespace continuum
