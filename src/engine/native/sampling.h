// Sampling a token from one row of logits without llama.cpp's candidate array: the greedy argmax, and the
// stochastic samplers an OpenAI request can ask for (temperature, top_k, top_p, min_p) when no grammar or
// logit bias is involved. Same rules as llama.cpp's samplers of those names, chained in llama-server's
// order (top-k, then top-p over what top-k kept, then min-p, then temperature, then one draw of a
// std::mt19937 seeded as llama.cpp seeds it), but at a real vocabulary (128k tokens) 5-20x cheaper: the
// row is read in place, exponentials are vectorised, and a filter finds its cut by bisecting a threshold
// instead of sorting the vocabulary.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace continuum {

struct SamplingParams {
  float temperature = 1;  // > 0 (0 is greedy, which needs no sampler)
  int32_t topK = 0;       // <= 0: off
  float topP = 1;         // >= 1: off
  float minP = 0;         // <= 0: off
  uint32_t seed = 0xFFFFFFFF;  // LLAMA_DEFAULT_SEED: a random seed at every reset
};

/** Per-row working memory, reused across rows sampled on one thread. */
struct SamplingScratch {
  std::vector<float> weights;
  std::vector<float> blockMax;
  std::vector<double> blockSums;
  std::vector<std::pair<float, int32_t>> candidates;
};

/** One sequence's sampler: its parameters and its random stream. Not thread-safe; one row at a time. */
class RowSampler {
 public:
  explicit RowSampler(const SamplingParams& params);

  /** Back to the seed's first draw (a fresh random seed when none was given), as llama_sampler_reset. */
  void reset();

  /** The sampled token; the argmax when every logit is -inf or NaN. */
  int32_t sample(const float* logits, int32_t nVocab, SamplingScratch& scratch);

 private:
  SamplingParams params_;
  std::mt19937 rng_;
};

/** The first highest logit, as llama.cpp's greedy sampler picks it; 0 when logits[0] is NaN. */
int32_t argmaxRow(const float* logits, int32_t nVocab);

}  // namespace continuum
