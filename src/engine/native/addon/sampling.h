// Sampling a token from one row of logits without llama.cpp's candidate array: the greedy argmax, and the
// samplers an OpenAI request can ask for (logit_bias, repetition_penalty, presence_penalty,
// frequency_penalty, temperature, top_k, top_p, min_p). Same rules as llama.cpp's samplers of those names,
// chained in llama-server's order (the biases and penalties, then top-k, then top-p over what top-k kept,
// then min-p, then temperature, then one draw of a std::mt19937 seeded as llama.cpp seeds it), but at a
// real vocabulary (128k tokens)
// 2-20x cheaper: the row is read in place (copied only to add biases and penalties), exponentials are
// vectorised, and a filter finds its cut by bisecting a threshold instead of sorting the vocabulary. A
// grammar is llama.cpp's (sampler-api.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "row-kernels.h"

namespace continuum {

struct SamplingParams {
  float temperature = 1;  // <= 0: greedy (the argmax of the biased row)
  int32_t topK = 0;       // <= 0: off
  float topP = 1;         // >= 1: off
  float minP = 0;         // <= 0: off
  uint32_t seed = 0xFFFFFFFF;  // LLAMA_DEFAULT_SEED: a random seed at every reset
  // OpenAI's: a token's logit less presencePenalty once it was accepted, less frequencyPenalty each time
  float presencePenalty = 0;
  float frequencyPenalty = 0;
  // vLLM's (and llama.cpp's repeat penalty): the logit of a token in the prompt or accepted, divided by it
  // where positive, multiplied where not (1: off)
  float repetitionPenalty = 1;

  /** Whether any penalty is on: the sampler then counts the tokens the sequence takes. */
  bool penalized() const { return presencePenalty != 0 || frequencyPenalty != 0 || repetitionPenalty != 1; }
};

/** Per-row working memory, reused across rows sampled on one thread. */
struct SamplingScratch {
  std::vector<float> weights;
  std::vector<float> blockMax;
  std::vector<double> blockSums;
  std::vector<std::pair<float, int32_t>> candidates;
  std::vector<float> biased;  // the row with the logit biases and penalties added
  std::vector<std::pair<float, int32_t>> allowed;
};

/**
 * Every token's weight e^((logit - top) * invT) into s.weights, with the block maxima and the block sums;
 * `top` gets the row's highest logit (not finite: nothing to draw, and the rest is left undone). Returns the
 * weights' total.
 */
double weighRow(const float* x, int32_t n, float invT, SamplingScratch& s, float& top);

struct LogitBias {
  int32_t token;
  float bias;
};

/** One sequence's sampler: its parameters and its random stream. Not thread-safe; one row at a time. */
class RowSampler {
 public:
  /**
   * biases: added to their tokens' logits first (a token may appear more than once: the biases add up);
   * prompt: the tokens the repetition penalty counts besides the accepted ones
   */
  RowSampler(const SamplingParams& params, std::vector<LogitBias> biases, const std::vector<int32_t>& prompt = {});

  /**
   * Back to the seed's first draw (a fresh random seed when none was given) with no token accepted (the
   * prompt's still counted), as llama_sampler_reset.
   */
  void reset();

  /** A token the sequence took (sampled or given): what the penalties count. */
  void accept(int32_t token);

  /**
   * The row with the biases added, then the repetition penalty, then the presence and frequency penalties
   * (llama.cpp's order; the row itself when there are none), in scratch.
   */
  const float* adjustedRow(const float* logits, int32_t nVocab, SamplingScratch& scratch) const;

  /** The sampled token; the argmax when every logit is -inf or NaN. Biases' tokens must be < nVocab. */
  int32_t sample(const float* logits, int32_t nVocab, SamplingScratch& scratch);

  /** Whether it draws from the whole (biased) distribution: greedy, or no top-k, top-p or min-p cut. */
  bool unfiltered() const;

  /**
   * Whether sampleAllowed samples under a constraint: greedy, top-k (top-p and min-p then cut the k
   * highest allowed), top-p without top-k (min-p then cuts what it keeps), or min-p alone.
   */
  bool walksConstrained() const;

  /**
   * The token drawn from the distribution restricted to the tokens `allowed` accepts (a grammar's next
   * tokens), as if the others' logits were -inf before the filters: the logits are asked about highest
   * first, only until the filters have what they keep (greedy: the first allowed; top-k: k; min-p alone:
   * the highest allowed, then the ones above its cut; top-p alone: until its cut is known whatever the
   * tokens below one window are, else -1: sampleNucleusAllowed). -1 when no token is allowed.
   * Needs walksConstrained().
   */
  int32_t sampleAllowed(const float* logits, int32_t nVocab, SamplingScratch& scratch,
                        const std::function<bool(int32_t)>& allowed);

  /**
   * Draws from the whole (biased) distribution until `allowed` accepts a token, at most maxDraws times
   * (-1 then): rejection sampling, so an accepted token follows the distribution restricted to the allowed
   * ones. One exponential pass over the row, then each draw walks block sums. Needs unfiltered().
   */
  int32_t sampleRejecting(const float* logits, int32_t nVocab, SamplingScratch& scratch,
                          const std::function<bool(int32_t)>& allowed, int32_t maxDraws);

 private:
  /** sample() on the row adjustedRow() gave */
  int32_t sampleAdjusted(const float* x, int32_t nVocab, SamplingScratch& scratch);
  /** sampleAllowed's top-p without top-k, on the row adjustedRow() gave */
  int32_t sampleNucleusAllowed(const float* x, int32_t nVocab, SamplingScratch& scratch,
                               const std::function<bool(int32_t)>& allowed, double u);
  /** top-p, min-p and the draw over candidates highest first (past min-p's cut, any order will do) */
  int32_t drawFromHighest(const std::vector<std::pair<float, int32_t>>& cands, double u) const;

  SamplingParams params_;
  std::vector<LogitBias> biases_;
  std::unordered_map<int32_t, int32_t> accepted_;  // token -> times accepted (kept only with a penalty)
  std::unordered_set<int32_t> prompt_;             // the prompt's tokens (kept only with a repetition penalty)
  std::mt19937 rng_;
};

}  // namespace continuum
