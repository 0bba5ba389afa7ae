// Compiled with -O3 -fno-trapping-math (scripts/build-native.mjs): the loops below are written to
// vectorise, and GCC keeps a loop with a float comparison scalar unless it may assume no FP traps.
#include "row-kernels.h"

#include <algorithm>
#include <cmath>

namespace continuum {

#if defined(__x86_64__) && defined(__GNUC__)
// One copy for AVX2 machines, one for any x86-64; the loader picks (GNU ifunc).
#define CONTINUUM_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CONTINUUM_VECTOR_CLONES
#endif

namespace kernels {

constexpr int32_t kLanes = 16;

CONTINUUM_VECTOR_CLONES
float blockMaxima(const float* x, int32_t n, float* blockMax) {
  float top = -INFINITY;
  for (int32_t from = 0, b = 0; from < n; from += kBlock, b++) {
    const int32_t to = std::min(n, from + kBlock);
    float lanes[kLanes];
    for (float& lane : lanes) lane = -INFINITY;
    int32_t i = from;
    for (; i + kLanes <= to; i += kLanes) {
      for (int32_t k = 0; k < kLanes; k++) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
    }
    for (; i < to; i++) lanes[0] = x[i] > lanes[0] ? x[i] : lanes[0];
    float m = lanes[0];
    for (float lane : lanes) m = lane > m ? lane : m;
    blockMax[b] = m;
    top = m > top ? m : top;
  }
  return top;
}

CONTINUUM_VECTOR_CLONES
void expWeights(const float* __restrict x, int32_t n, float shift, float scale, float floor, float* __restrict w) {
  for (int32_t i = 0; i < n; i++) {
    const float e = expNonPositive((x[i] - shift) * scale);
    w[i] = x[i] >= floor ? e : 0.0f;
  }
}

CONTINUUM_VECTOR_CLONES
double blockSums(const float* w, int32_t n, double* sums) {
  double total = 0;
  for (int32_t from = 0, b = 0; from < n; from += kBlock, b++) {
    const int32_t to = std::min(n, from + kBlock);
    float lanes[kLanes] = {};
    int32_t i = from;
    for (; i + kLanes <= to; i += kLanes) {
      for (int32_t k = 0; k < kLanes; k++) lanes[k] += w[i + k];
    }
    double sum = 0;
    for (; i < to; i++) sum += w[i];
    for (float lane : lanes) sum += lane;
    sums[b] = sum;
    total += sum;
  }
  return total;
}

CONTINUUM_VECTOR_CLONES
AtLeast atLeast(const float* x, const float* w, int32_t n, const float* blockMax, float t) {
  AtLeast out;
  for (int32_t from = 0, b = 0; from < n; from += kBlock, b++) {
    if (!(blockMax[b] >= t)) continue;
    const int32_t to = std::min(n, from + kBlock);
    int32_t count = 0;  // an integer sum: the vectoriser reorders it freely
    for (int32_t i = from; i < to; i++) count += x[i] >= t ? 1 : 0;
    out.count += count;
    if (w == nullptr) continue;
    float lanes[kLanes] = {};  // a float sum is reordered only by hand, in lanes
    int32_t i = from;
    for (; i + kLanes <= to; i += kLanes) {
      // a product, not a select of w[i + k]: the select came out of GCC 12.2 (-O3, AVX2) summing 40% short
      for (int32_t k = 0; k < kLanes; k++) lanes[k] += (x[i + k] >= t ? 1.0f : 0.0f) * w[i + k];
    }
    double mass = 0;
    for (; i < to; i++) mass += x[i] >= t ? w[i] : 0.0f;
    for (float lane : lanes) mass += lane;
    out.mass += mass;
  }
  return out;
}

int32_t pickByMass(const float* w, int32_t n, const double* sums, double target) {
  double cum = 0;
  for (int32_t from = 0, b = 0; from < n; from += kBlock, b++) {
    if (cum + sums[b] < target) {
      cum += sums[b];
      continue;
    }
    const int32_t to = std::min(n, from + kBlock);
    for (int32_t i = from; i < to; i++) {
      cum += w[i];
      if (cum >= target && w[i] > 0) return i;
    }
  }
  for (int32_t i = n - 1; i > 0; i--) {
    if (w[i] > 0) return i;
  }
  return 0;
}

}  // namespace kernels

// The highest value first, kept in independent lanes (a running index would chain every comparison to the
// load it selects: 10 cycles a logit), then the first index holding it.
CONTINUUM_VECTOR_CLONES
int32_t argmaxRow(const float* logits, int32_t nVocab) {
  constexpr int32_t kLanes = 16;
  float lanes[kLanes];
  for (float& lane : lanes) lane = logits[0];
  int32_t t = 0;
  for (; t + kLanes <= nVocab; t += kLanes) {
    for (int32_t k = 0; k < kLanes; k++) lanes[k] = logits[t + k] > lanes[k] ? logits[t + k] : lanes[k];
  }
  for (; t < nVocab; t++) lanes[0] = logits[t] > lanes[0] ? logits[t] : lanes[0];
  float best = lanes[0];
  for (float lane : lanes) best = lane > best ? lane : best;
  for (int32_t i = 0; i < nVocab; i++) {
    if (logits[i] == best) return i;
  }
  return 0;  // logits[0] is NaN: nothing compares above it
}

}  // namespace continuum
