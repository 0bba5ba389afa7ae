#include "logprobs.h"

#include <cmath>

#include "row-kernels.h"

namespace continuum {

namespace {

// The topN highest finite logits, highest first, ties by the lower id: blocks whose maximum cannot enter the
// list are skipped, so a real vocabulary costs about one pass over blockMax and a few blocks.
int32_t topLogits(const float* x, int32_t n, const float* blockMax, int32_t topN, int32_t* ids, float* values) {
  int32_t count = 0;
  for (int32_t from = 0, b = 0; from < n && topN > 0; from += kernels::kBlock, b++) {
    // ids grow as the scan goes, so an equal logit seen later ranks below: it enters only when strictly higher
    if (count == topN && !(blockMax[b] > values[count - 1])) continue;
    const int32_t to = std::min(n, from + kernels::kBlock);
    for (int32_t i = from; i < to; i++) {
      const float v = x[i];
      if (!(v > -INFINITY)) continue;  // -inf and NaN
      if (count == topN && !(v > values[count - 1])) continue;
      int32_t at = count < topN ? count++ : topN - 1;
      while (at > 0 && values[at - 1] < v) {
        values[at] = values[at - 1];
        ids[at] = ids[at - 1];
        at--;
      }
      values[at] = v;
      ids[at] = i;
    }
  }
  return count;
}

}  // namespace

int32_t rowLogprobs(const float* logits, int32_t nVocab, int32_t token, int32_t topN, SamplingScratch& scratch,
                    float* logprob, int32_t* topTokens, float* topLogprobs) {
  float top;
  const double total = weighRow(logits, nVocab, 1.0f, scratch, top);
  if (!(top > -INFINITY)) {
    *logprob = -INFINITY;
    return 0;
  }
  const float logZ = top + static_cast<float>(std::log(total));
  const float chosen = logits[token];
  *logprob = chosen > -INFINITY ? chosen - logZ : -INFINITY;
  const int32_t count = topLogits(logits, nVocab, scratch.blockMax.data(), std::min(topN, kMaxTopLogprobs),
                                  topTokens, topLogprobs);
  for (int32_t k = 0; k < count; k++) topLogprobs[k] -= logZ;
  return count;
}

int32_t tokenRank(const float* logits, int32_t nVocab, int32_t token, const SamplingScratch& scratch) {
  const float chosen = logits[token];
  int32_t higher = 0;
  for (int32_t from = 0, b = 0; from < nVocab; from += kernels::kBlock, b++) {
    if (!(scratch.blockMax[b] > chosen)) continue;
    const int32_t to = std::min(nVocab, from + kernels::kBlock);
    for (int32_t i = from; i < to; i++) higher += logits[i] > chosen ? 1 : 0;
  }
  return higher + 1;
}

}  // namespace continuum
