#include "sampling.h"

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cmath>
#include <functional>

namespace continuum {

namespace {

using kernels::AtLeast;
using kernels::atLeast;

/** Largest first; equal logits by token id, so a cut through ties is the same every time. */
bool higher(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

/** Every (logit, token) with lo <= logit < hi, from the blocks that can hold one. */
void gather(const float* x, int32_t n, const float* blockMax, float lo, float hi,
            std::vector<std::pair<float, int32_t>>& out) {
  out.clear();
  for (int32_t from = 0, b = 0; from < n; from += kernels::kBlock, b++) {
    if (!(blockMax[b] >= lo)) continue;
    const int32_t to = std::min(n, from + kernels::kBlock);
    for (int32_t i = from; i < to; i++) {
      if (x[i] >= lo && x[i] < hi) out.emplace_back(x[i], i);
    }
  }
}

/**
 * A cut through the row for a filter that keeps the highest logits until `enough` holds of them (a count
 * for top-k, a probability mass for top-p): logits >= hi are too few, logits >= lo enough. Bisects the
 * threshold until `narrow` holds (few enough logits left to sort); every pass skips the blocks below its
 * threshold, and a real model's distribution leaves few blocks near the top.
 */
struct Cut {
  float lo;
  float hi;
  AtLeast aboveHi;  // count and mass of the logits >= hi
};

template <typename Enough, typename Narrow>
Cut findCut(const float* x, const float* w, int32_t n, const float* blockMax, float top, Enough enough,
            Narrow narrow) {
  Cut cut{top, std::nextafter(top, INFINITY), AtLeast{}};
  AtLeast aboveLo = atLeast(x, w, n, blockMax, cut.lo);
  for (float step = 1; !enough(aboveLo); step *= 2) {
    cut.hi = cut.lo;
    cut.aboveHi = aboveLo;
    cut.lo = top - step > -FLT_MAX ? top - step : -FLT_MAX;
    aboveLo = atLeast(x, w, n, blockMax, cut.lo);
    if (cut.lo == -FLT_MAX) break;  // every finite logit: enough, or all there is
  }
  for (int32_t i = 0; i < 64 && !narrow(aboveLo, cut.aboveHi); i++) {
    const float mid = cut.lo + (cut.hi - cut.lo) / 2;
    if (!(mid > cut.lo && mid < cut.hi)) break;  // ties: the band cannot be split further
    const AtLeast aboveMid = atLeast(x, w, n, blockMax, mid);
    if (enough(aboveMid)) {
      cut.lo = mid;
      aboveLo = aboveMid;
    } else {
      cut.hi = mid;
      cut.aboveHi = aboveMid;
    }
  }
  return cut;
}

/**
 * The walks under a constraint: the logits below `hi` down to a threshold that leaves about `window` of the
 * row at or above it, highest first, into out. Returns the threshold (-FLT_MAX: the rest of the row).
 */
float nextWindow(const float* x, int32_t n, const float* blockMax, float top, int64_t window, float hi,
                 std::vector<std::pair<float, int32_t>>& out) {
  const Cut cut = findCut(
      x, nullptr, n, blockMax, top, [window](const AtLeast& a) { return a.count >= window; },
      [window](const AtLeast& lo, const AtLeast&) { return lo.count <= 2 * window; });
  gather(x, n, blockMax, cut.lo, hi, out);
  std::sort(out.begin(), out.end(), higher);
  return cut.lo;
}

/** Draws from the candidates' first `kept`, weighted e^((logit - top) / T). */
int32_t drawFrom(const std::vector<std::pair<float, int32_t>>& cands, size_t kept, float top, float invT,
                 double u) {
  double total = 0;
  for (size_t i = 0; i < kept; i++) total += kernels::expNonPositive((cands[i].first - top) * invT);
  const double target = u * total;
  double cum = 0;
  for (size_t i = 0; i < kept; i++) {
    cum += kernels::expNonPositive((cands[i].first - top) * invT);
    if (cum >= target) return cands[i].second;
  }
  return cands[kept - 1].second;
}

uint32_t seedFor(uint32_t seed) {
  return seed == 0xFFFFFFFF ? std::random_device()() : seed;
}

}  // namespace

double weighRow(const float* x, int32_t n, float invT, SamplingScratch& s, float& top) {
  const int32_t blocks = kernels::blockCount(n);
  s.blockMax.resize(static_cast<size_t>(blocks));
  s.blockSums.resize(static_cast<size_t>(blocks));
  s.weights.resize(static_cast<size_t>(n));
  top = kernels::blockMaxima(x, n, s.blockMax.data());
  if (!std::isfinite(top)) return 0;
  kernels::expWeights(x, n, top, invT, -INFINITY, s.weights.data());
  return kernels::blockSums(s.weights.data(), n, s.blockSums.data());
}

int32_t RowSampler::drawFromHighest(const std::vector<std::pair<float, int32_t>>& cands, double u) const {
  // top-p over them: the shortest prefix whose share of their probability (at temperature 1) reaches p
  const float top = cands[0].first;
  size_t keep = cands.size();
  if (params_.topP < 1) {
    double z = 0;
    for (const auto& c : cands) z += kernels::expNonPositive(c.first - top);
    double cum = 0;
    for (size_t i = 0; i < cands.size(); i++) {
      cum += kernels::expNonPositive(cands[i].first - top);
      if (cum >= params_.topP * z) {
        keep = i + 1;
        break;
      }
    }
  }
  // then min-p: logits at least the highest + ln(min_p)
  const float minLogit = params_.minP > 0 ? top + std::log(params_.minP) : -INFINITY;
  size_t aboveMinP = 1;
  while (aboveMinP < keep && cands[aboveMinP].first >= minLogit) aboveMinP++;
  return drawFrom(cands, std::min(keep, aboveMinP), top, 1.0f / params_.temperature, u);
}

RowSampler::RowSampler(const SamplingParams& params, std::vector<LogitBias> biases, const std::vector<int32_t>& prompt)
    : params_(params), biases_(std::move(biases)), rng_(seedFor(params.seed)) {
  if (params_.repetitionPenalty != 1) prompt_.insert(prompt.begin(), prompt.end());
}

bool RowSampler::unfiltered() const {
  return params_.temperature <= 0 || (params_.topK <= 0 && params_.topP >= 1 && params_.minP <= 0);
}

bool RowSampler::walksConstrained() const {
  return params_.temperature <= 0 || params_.topK > 0 || params_.topP < 1 || params_.minP > 0;
}

int32_t RowSampler::sampleAllowed(const float* logits, int32_t n, SamplingScratch& s,
                                  const std::function<bool(int32_t)>& allowed) {
  const float* x = adjustedRow(logits, n, s);
  const bool greedy = params_.temperature <= 0;
  const double u = greedy ? 0.0 : std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  if (!greedy && params_.topK <= 0 && params_.topP < 1) return sampleNucleusAllowed(x, n, s, allowed, u);
  s.blockMax.resize(static_cast<size_t>(kernels::blockCount(n)));
  const float* blockMax = s.blockMax.data();
  const float top = kernels::blockMaxima(x, n, s.blockMax.data());
  if (!std::isfinite(top)) return -1;
  // greedy's token is the argmax when that is allowed: a model that follows its grammar, most of the time
  if (greedy) {
    const int32_t best = argmaxRow(x, n);
    if (allowed(best)) return best;
  }
  // the highest allowed logits, in order, until top-k has k (greedy and min-p: the highest one): windows of
  // the highest logits not yet seen, each about four times as many as the one before, found by bisecting a
  // threshold, then gathered and sorted
  const size_t need = !greedy && params_.topK > 0 ? static_cast<size_t>(params_.topK) : 1;
  auto& kept = s.allowed;
  kept.clear();
  float hi = INFINITY;
  for (int64_t window = static_cast<int64_t>(std::max<size_t>(64, 4 * need)); kept.size() < need; window *= 4) {
    const float lo = nextWindow(x, n, blockMax, top, window, hi, s.candidates);
    for (const auto& c : s.candidates) {
      if (!allowed(c.second)) continue;
      kept.push_back(c);
      if (kept.size() == need) break;
    }
    if (lo == -FLT_MAX) break;  // every logit seen
    hi = lo;
  }
  if (kept.empty()) return -1;
  if (greedy) return kept[0].second;
  if (params_.topK <= 0) {
    // min-p alone: every allowed logit at least the highest allowed + ln(min_p), in any order after it
    const auto [highest, token] = kept[0];
    gather(x, n, blockMax, highest + std::log(params_.minP), std::nextafter(highest, INFINITY), s.candidates);
    for (const auto& c : s.candidates) {
      if (c.second != token && allowed(c.second)) kept.push_back(c);
    }
  }
  return drawFromHighest(kept, u);
}

// Top-p over the allowed tokens keeps the shortest run of the highest ones holding p of the allowed
// tokens' probability, a total that takes every token's check to know. One window of the highest logits
// bounds it instead: the allowed total lies between the allowed mass in the window and that plus the mass
// below it (the row's total less the window's). Where the cut is the same at both ends it is the cut, and
// the tokens below were never asked about: at a position the model is sure of. Exact up to rounding.
// Elsewhere -1, and llama.cpp's chain samples (sampleUnder): a grammar answers about one token at a time
// several times slower than the chain asks about all of them, so walking on would cost more than it saves.
constexpr int64_t kNucleusWindow = 64;

int32_t RowSampler::sampleNucleusAllowed(const float* x, int32_t n, SamplingScratch& s,
                                         const std::function<bool(int32_t)>& allowed, double u) {
  // probabilities at temperature 1, as top-p reads them, relative to the row's highest logit
  float top;
  const double total = weighRow(x, n, 1.0f, s, top);
  if (!std::isfinite(top)) return -1;
  const float lo = nextWindow(x, n, s.blockMax.data(), top, kNucleusWindow, INFINITY, s.candidates);
  auto& kept = s.allowed;
  kept.clear();
  double seen = 0;
  double allowedMass = 0;
  for (const auto& c : s.candidates) {
    const double m = kernels::expNonPositive(c.first - top);
    seen += m;
    if (!allowed(c.second)) continue;
    kept.push_back(c);
    allowedMass += m;
  }
  if (kept.empty()) return -1;
  const double below = lo == -FLT_MAX ? 0.0 : std::max(0.0, total - seen);
  // the shortest prefix of kept whose mass reaches target (kept.size() + 1: none does)
  const auto reaching = [&](double target) {
    double cum = 0;
    for (size_t i = 0; i < kept.size(); i++) {
      cum += kernels::expNonPositive(kept[i].first - top);
      if (cum >= target) return i + 1;
    }
    return kept.size() + 1;
  };
  const size_t keep = reaching(params_.topP * allowedMass);
  if (reaching(params_.topP * (allowedMass + below)) != keep) return -1;
  // then min-p over what top-p kept: logits at least the highest allowed + ln(min_p)
  const float highest = kept[0].first;
  const float minLogit = params_.minP > 0 ? highest + std::log(params_.minP) : -INFINITY;
  size_t aboveMinP = 1;
  while (aboveMinP < keep && kept[aboveMinP].first >= minLogit) aboveMinP++;
  return drawFrom(kept, std::min(keep, aboveMinP), highest, 1.0f / params_.temperature, u);
}

int32_t RowSampler::sampleRejecting(const float* logits, int32_t n, SamplingScratch& s,
                                    const std::function<bool(int32_t)>& allowed, int32_t maxDraws) {
  const float* x = adjustedRow(logits, n, s);
  float top;
  const double total = weighRow(x, n, 1.0f / params_.temperature, s, top);
  if (!std::isfinite(top)) return -1;
  for (int32_t i = 0; i < maxDraws; i++) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    const int32_t token = kernels::pickByMass(s.weights.data(), n, s.blockSums.data(), u * total);
    if (allowed(token)) return token;
  }
  return -1;
}

const float* RowSampler::adjustedRow(const float* logits, int32_t n, SamplingScratch& s) const {
  if (biases_.empty() && accepted_.empty() && prompt_.empty()) return logits;
  s.biased.assign(logits, logits + n);
  float* x = s.biased.data();
  for (const LogitBias& b : biases_) x[b.token] += b.bias;
  const float r = params_.repetitionPenalty;
  const auto repeat = [x, r](int32_t token) { x[token] = x[token] > 0 ? x[token] / r : x[token] * r; };
  for (int32_t token : prompt_) {
    if (token < n) repeat(token);
  }
  for (const auto& [token, times] : accepted_) {
    if (token >= n) continue;
    if (r != 1 && prompt_.count(token) == 0) repeat(token);
    x[token] -= params_.presencePenalty + params_.frequencyPenalty * times;
  }
  return x;
}

void RowSampler::accept(int32_t token) {
  if (params_.penalized()) accepted_[token]++;
}

void RowSampler::reset() {
  rng_.seed(seedFor(params_.seed));
  accepted_.clear();
}

int32_t RowSampler::sample(const float* logits, int32_t n, SamplingScratch& s) {
  const float* x = adjustedRow(logits, n, s);
  if (params_.temperature <= 0) return argmaxRow(x, n);
  return sampleAdjusted(x, n, s);
}

int32_t RowSampler::sampleAdjusted(const float* x, int32_t n, SamplingScratch& s) {
  // one draw a token, as llama.cpp's dist sampler draws it
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const int32_t blocks = kernels::blockCount(n);
  s.blockMax.resize(static_cast<size_t>(blocks));
  s.blockSums.resize(static_cast<size_t>(blocks));
  s.weights.resize(static_cast<size_t>(n));
  float* w = s.weights.data();
  const float* blockMax = s.blockMax.data();
  const float top = kernels::blockMaxima(x, n, s.blockMax.data());
  if (!std::isfinite(top)) return argmaxRow(x, n);
  const float invT = 1.0f / params_.temperature;
  // min-p keeps p_i >= minP x p_max, i.e. logit >= top + ln(minP), over what top-k and top-p kept
  const float minLogit = params_.minP > 0 ? top + std::log(params_.minP) : -INFINITY;
  auto& cands = s.candidates;

  if (params_.topK > 0 && params_.topK < n) {
    // every logit >= lo is gathered and partially sorted: bisect until they are not many more than k
    const int32_t k = params_.topK;
    const int32_t gatherAtMost = k + std::max(k, 2048);
    const Cut cut = findCut(
        x, nullptr, n, blockMax, top, [k](const AtLeast& a) { return a.count >= k; },
        [gatherAtMost](const AtLeast& lo, const AtLeast&) { return lo.count <= gatherAtMost; });
    gather(x, n, blockMax, cut.lo, INFINITY, cands);
    const size_t kept = std::min(cands.size(), static_cast<size_t>(k));
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(kept), cands.end(), higher);
    cands.resize(kept);
    return drawFromHighest(cands, u);
  }

  if (params_.topP < 1) {
    // probabilities at temperature 1 (top-p comes before the temperature), then the cut where the highest
    // logits' share reaches p: those >= hi are all in, the band [lo, hi) sorted and taken until it does
    kernels::expWeights(x, n, top, 1.0f, -INFINITY, w);
    const double need = params_.topP * kernels::blockSums(w, n, s.blockSums.data());
    // the band [lo, hi) is gathered and sorted: bisect until it holds a few hundred logits
    const Cut cut = findCut(
        x, w, n, blockMax, top, [need](const AtLeast& a) { return a.count > 0 && a.mass >= need; },
        [](const AtLeast& lo, const AtLeast& hi) { return lo.count - hi.count <= 256; });
    gather(x, n, blockMax, cut.lo, cut.hi, cands);
    std::sort(cands.begin(), cands.end(), higher);
    double mass = cut.aboveHi.mass;
    size_t band = 0;
    while (band < cands.size() && (mass < need || cut.aboveHi.count + band == 0)) {
      mass += w[cands[band].second];
      band++;
    }
    // then min-p, a threshold: through the certain part and the band alike
    while (band > 0 && cands[band - 1].first < minLogit) band--;
    const float floor = std::max(cut.hi, minLogit);
    kernels::expWeights(x, n, top, invT, floor, w);
    const double certain = kernels::blockSums(w, n, s.blockSums.data());
    double inBand = 0;
    for (size_t i = 0; i < band; i++) inBand += kernels::expNonPositive((cands[i].first - top) * invT);
    const double target = u * (certain + inBand);
    if (band == 0 || (certain > 0 && target <= certain)) {
      return kernels::pickByMass(w, n, s.blockSums.data(), target);
    }
    return drawFrom(cands, band, top, invT, (target - certain) / inBand);
  }

  // temperature alone, or with min-p: every token at or above min-p's cut, in token order
  kernels::expWeights(x, n, top, invT, minLogit, w);
  const double total = kernels::blockSums(w, n, s.blockSums.data());
  return kernels::pickByMass(w, n, s.blockSums.data(), u * total);
}

}  // namespace continuum
