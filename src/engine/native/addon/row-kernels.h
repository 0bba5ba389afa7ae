// Passes over one row of logits for the samplers (sampling.cpp), written for the vectoriser. A row is
// processed in blocks: a block's maximum lets a pass over "logits at least t" skip every block below t
// (most of a real vocabulary, for t near the top), and a block's sum lets a draw find its block before it
// walks tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace continuum {

namespace kernels {

constexpr int32_t kBlock = 256;

inline int32_t blockCount(int32_t n) {
  return (n + kBlock - 1) / kBlock;
}

// e^d for d <= 0, to within 1e-6 relative: 2^(d log2 e) split into an integer power (the exponent bits)
// and 2^f for f in [-0.5, 0.5] by a degree-5 polynomial (least-squares fit of 2^f, relative error 8e-8).
// Below e^-87 (under FLT_MIN) it is 0.
inline float expNonPositive(float d) {
  const float x = std::max(d, -87.0f);
  const float t = x * 1.44269504088896341f;
  const float r = (t + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5 x 2^23 pushes the fraction out
  const float f = t - r;
  float p = 0.0013266970f;
  p = p * f + 0.0096754597f;
  p = p * f + 0.055507426f;
  p = p * f + 0.24022122f;
  p = p * f + 0.69314695f;
  p = p * f + 1.0000001f;
  int32_t bits = (static_cast<int32_t>(r) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return d < -87.0f ? 0.0f : p * scale;
}

/** Each block's maximum into blockMax; returns the row's (NaN logits are ignored; -inf if all are). */
float blockMaxima(const float* x, int32_t n, float* blockMax);

/** w[i] = e^((x[i] - shift) * scale) where x[i] >= floor, else 0 (shift: the row's maximum). */
void expWeights(const float* x, int32_t n, float shift, float scale, float floor, float* w);

/** Each block's sum of w into sums; returns the total. */
double blockSums(const float* w, int32_t n, double* sums);

struct AtLeast {
  int32_t count = 0;
  double mass = 0;  // of w, when given
};

/** How many logits are >= t, and (w given) their weights' sum; blocks whose maximum is below t skipped. */
AtLeast atLeast(const float* x, const float* w, int32_t n, const float* blockMax, float t);

/**
 * The first index at which the running sum of w reaches target (blocks first, then tokens); the last
 * positive weight when rounding leaves the target just out of reach.
 */
int32_t pickByMass(const float* w, int32_t n, const double* sums, double target);

}  // namespace kernels

/** The first highest logit, as llama.cpp's greedy sampler picks it; 0 when logits[0] is NaN. */
int32_t argmaxRow(const float* logits, int32_t nVocab);

}  // namespace continuum
