// A request's sampling parameters, llama.cpp's sampler chain for them, sampling under a grammar
// (sampleUnder: ours where it gives the constrained distribution, else the chain), and sampleLogits(), which
// samples given logits with either our RowSampler or llama.cpp's chain, so that the two can be held side by
// side on the same rows (the sampling bench, the tests of our sampler's distribution).
#include <cmath>
#include <memory>

#include "addon.h"
#include "logprobs.h"

namespace continuum {

SamplingParams parseSamplingParams(Napi::Env env, const Napi::Object& o) {
  const double temperature = optNumber(o, "temperature", 0);
  const double topK = optNumber(o, "topK", 0);
  const double topP = optNumber(o, "topP", 1);
  const double minP = optNumber(o, "minP", 0);
  const double seed = optNumber(o, "seed", LLAMA_DEFAULT_SEED);
  const double presencePenalty = optNumber(o, "presencePenalty", 0);
  const double frequencyPenalty = optNumber(o, "frequencyPenalty", 0);
  const double repetitionPenalty = optNumber(o, "repetitionPenalty", 1);
  if (!std::isfinite(temperature) || !std::isfinite(topK) || std::isnan(topP) || std::isnan(minP) ||
      !std::isfinite(presencePenalty) || !std::isfinite(frequencyPenalty)) {
    throw Napi::RangeError::New(env, "temperature, topK, topP, minP and the penalties must be numbers");
  }
  if (!(repetitionPenalty > 0) || !std::isfinite(repetitionPenalty)) {
    throw Napi::RangeError::New(env, "repetitionPenalty must be a number > 0");
  }
  if (seed < 0 || seed > 4294967295.0) {
    throw Napi::RangeError::New(env, "seed must be a uint32");
  }
  SamplingParams p;
  p.temperature = static_cast<float>(temperature);
  p.topK = topK > INT32_MAX ? INT32_MAX : static_cast<int32_t>(topK);
  p.topP = static_cast<float>(topP);
  p.minP = static_cast<float>(minP);
  p.seed = static_cast<uint32_t>(seed);
  p.presencePenalty = static_cast<float>(presencePenalty);
  p.frequencyPenalty = static_cast<float>(frequencyPenalty);
  p.repetitionPenalty = static_cast<float>(repetitionPenalty);
  return p;
}

int32_t parseLogprobCount(Napi::Env env, const Napi::Object& o) {
  const Napi::Value v = o.Get("logprobs");
  if (v.IsUndefined() || v.IsNull()) return -1;
  const double n = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
  if (!(n >= 0 && n <= kMaxTopLogprobs) || n != std::floor(n)) {
    throw Napi::RangeError::New(env, "logprobs must be an integer from 0 to " + std::to_string(kMaxTopLogprobs));
  }
  return static_cast<int32_t>(n);
}

std::vector<LogitBias> parseLogitBias(Napi::Env env, const Napi::Object& o, int32_t nVocab) {
  std::vector<LogitBias> biases;
  if (!o.Has("logitBias") || !o.Get("logitBias").IsArray()) return biases;
  Napi::Array list = o.Get("logitBias").As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); i++) {
    Napi::Object entry = list.Get(i).As<Napi::Object>();
    const double token = optNumber(entry, "token", -1);
    if (token < 0 || token >= nVocab || token != static_cast<int32_t>(token)) {
      throw Napi::RangeError::New(env, "logitBias token out of range");
    }
    biases.push_back({static_cast<int32_t>(token), static_cast<float>(optNumber(entry, "bias", 0))});
  }
  return biases;
}

void appendSamplingStages(llama_sampler* chain, const SamplingParams& p) {
  if (p.temperature <= 0) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    return;
  }
  if (p.topK > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.topK));
  if (p.topP < 1) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.topP, 1));
  if (p.minP > 0) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.minP, 1));
  llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(p.seed));
}

llama_token sampleWithChain(llama_sampler* chain, const float* logits, int32_t nVocab,
                            std::vector<llama_token_data>& cands, std::string& error) {
  try {
    cands.resize(static_cast<size_t>(nVocab));
    for (int32_t t = 0; t < nVocab; t++) cands[t] = llama_token_data{t, logits[t], 0.0f};
    llama_token_data_array arr{cands.data(), cands.size(), -1, false};
    llama_sampler_apply(chain, &arr);
    if (arr.selected < 0 || static_cast<size_t>(arr.selected) >= arr.size ||
        !std::isfinite(arr.data[arr.selected].logit)) {
      error = "sampler selected no allowed token (grammar dead end?)";
      return -1;
    }
    return arr.data[arr.selected].id;
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
}

// Under a constraint (a grammar) llama.cpp's chain checks every candidate against it, milliseconds a row at
// a real vocabulary; ours asks about as few tokens as the request's samplers need, for the same
// distribution:
// - greedy, top-k (then top-p and min-p over the k), top-p without top-k, or min-p alone: the tokens highest
//   first, until the filter has what it keeps (RowSampler::sampleAllowed); top-p alone until its cut is
//   known, and where that takes more than a few thousand tokens (probability spread out), the chain;
// - a temperature alone: draws from the whole distribution until one is allowed, which is rejection
//   sampling: an accepted token follows the distribution restricted to the allowed ones. After
//   kRejectedDraws refusals (likely only where the allowed tokens hold under 2% of the probability: 256
//   refusals in a row at 2% happen 0.6% of the time), the chain.
// llama-server draws once and checks under every filter, which is not the constrained distribution when a
// cut is set.
constexpr int32_t kRejectedDraws = 256;

llama_token sampleUnder(RowSampler& own, llama_sampler* chain, const std::function<bool(int32_t)>& allowed,
                        const float* row, int32_t nVocab, SamplingScratch& scratch,
                        std::vector<llama_token_data>& cands, std::string& error) {
  llama_token token = -1;
  if (own.walksConstrained()) {
    token = own.sampleAllowed(row, nVocab, scratch, allowed);
  } else if (own.unfiltered()) {
    token = own.sampleRejecting(row, nVocab, scratch, allowed, kRejectedDraws);
  }
  if (token >= 0) return token;
  return sampleWithChain(chain, own.adjustedRow(row, nVocab, scratch), nVocab, cands, error);
}

std::vector<int32_t> tokenList(Napi::Env env, const Napi::Object& o, const char* key, int32_t nVocab) {
  std::vector<int32_t> tokens;
  if (!o.Has(key)) return tokens;
  const Napi::Value value = o.Get(key);
  const auto check = [&](double token) {
    if (token < 0 || token >= nVocab || token != static_cast<int32_t>(token)) {
      throw Napi::RangeError::New(env, std::string(key) + " token out of range");
    }
    tokens.push_back(static_cast<int32_t>(token));
  };
  if (value.IsTypedArray() && value.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
    Napi::Int32Array list = value.As<Napi::Int32Array>();
    tokens.reserve(list.ElementLength());
    for (size_t i = 0; i < list.ElementLength(); i++) check(list[i]);
  } else if (value.IsArray()) {
    Napi::Array list = value.As<Napi::Array>();
    for (uint32_t i = 0; i < list.Length(); i++) check(list.Get(i).As<Napi::Number>().DoubleValue());
  }
  return tokens;
}

// sampleLogits(logits: Float32Array, nVocab, params, draws, sampler: "continuum" | "llama.cpp") -> Int32Array:
// for each row of nVocab logits, `draws` tokens from one sampler made from params (logitBias,
// presencePenalty, frequencyPenalty, repetitionPenalty, temperature (<= 0: greedy), topK, topP, minP, seed;
// history: tokens accepted before the first draw, which the penalties count; promptTokens: tokens the
// repetition penalty counts besides; allowedTokens: a constraint standing in for a grammar, which llama.cpp's
// chain applies as a -inf bias on every other token). The draws accept nothing: each is from the same
// state, its random stream running on from draw to draw and row to row. "continuum" samples as the engine
// does, "llama.cpp" with llama.cpp's chain as llama-server builds it (the biases, then the penalties sampler,
// which counts the prompt's tokens for the presence and frequency penalties too).
static Napi::Value SampleLogits(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsTypedArray() ||
      info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array || !info[2].IsObject()) {
    throw Napi::TypeError::New(env, "sampleLogits(logits: Float32Array, nVocab, params, draws, sampler)");
  }
  Napi::Float32Array logits = info[0].As<Napi::Float32Array>();
  const int32_t nVocab = argInt(info, 1, "nVocab");
  const Napi::Object o = info[2].As<Napi::Object>();
  const SamplingParams params = parseSamplingParams(env, o);
  const int32_t draws = argInt(info, 3, "draws");
  const std::string sampler = argString(info, 4, "sampler");
  if (nVocab < 1 || logits.ElementLength() % static_cast<size_t>(nVocab) != 0) {
    throw Napi::RangeError::New(env, "logits must hold whole rows of nVocab");
  }
  if (draws < 0) throw Napi::RangeError::New(env, "draws must be >= 0");
  if (sampler != "continuum" && sampler != "llama.cpp") {
    throw Napi::TypeError::New(env, "sampler must be \"continuum\" or \"llama.cpp\"");
  }
  const std::vector<LogitBias> biases = parseLogitBias(env, o, nVocab);
  const std::vector<int32_t> history = tokenList(env, o, "history", nVocab);
  const std::vector<int32_t> prompt = tokenList(env, o, "promptTokens", nVocab);
  const bool constrained = o.Has("allowedTokens") && o.Get("allowedTokens").IsArray();
  std::vector<uint8_t> allowed(constrained ? static_cast<size_t>(nVocab) : 0, 0);
  for (int32_t t : tokenList(env, o, "allowedTokens", nVocab)) allowed[static_cast<size_t>(t)] = 1;

  // llama.cpp's chain: for "llama.cpp" the whole request; for ours only the constraint and the filters,
  // which it samples with when ours cannot (its row: ours with the biases and penalties added)
  const bool own = sampler == "continuum";
  std::vector<llama_logit_bias> chainBiases;
  if (!own) {
    for (const LogitBias& b : biases) chainBiases.push_back({b.token, b.bias});
  }
  for (int32_t t = 0; constrained && t < nVocab; t++) {
    if (allowed[static_cast<size_t>(t)] == 0) chainBiases.push_back({t, -INFINITY});
  }
  llama_sampler* chain = nullptr;
  if (!own || constrained) {
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    chain = llama_sampler_chain_init(cp);
    if (!chainBiases.empty()) {
      llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(nVocab, static_cast<int32_t>(chainBiases.size()),
                                                                   chainBiases.data()));
    }
    const auto taken = static_cast<int32_t>(history.size() + prompt.size());
    if (!own && params.penalized() && taken > 0) {
      llama_sampler_chain_add(chain, llama_sampler_init_penalties(nVocab, taken, params.repetitionPenalty,
                                                                  params.frequencyPenalty, params.presencePenalty));
    }
    appendSamplingStages(chain, params);
    if (!own) {
      for (int32_t t : prompt) llama_sampler_accept(chain, t);
      for (int32_t t : history) llama_sampler_accept(chain, t);
    }
  }
  RowSampler ours(params, biases, prompt);
  for (int32_t t : history) ours.accept(t);

  const size_t rows = logits.ElementLength() / static_cast<size_t>(nVocab);
  Napi::Int32Array out = Napi::Int32Array::New(env, rows * static_cast<size_t>(draws));
  SamplingScratch scratch;
  std::vector<llama_token_data> cands;
  std::string error;
  const auto isAllowed = [&allowed](int32_t t) { return allowed[static_cast<size_t>(t)] != 0; };
  for (size_t r = 0; r < rows && error.empty(); r++) {
    const float* row = logits.Data() + r * static_cast<size_t>(nVocab);
    for (int32_t d = 0; d < draws && error.empty(); d++) {
      out[r * draws + d] = !own          ? sampleWithChain(chain, row, nVocab, cands, error)
                           : constrained ? sampleUnder(ours, chain, isAllowed, row, nVocab, scratch, cands, error)
                                         : ours.sample(row, nVocab, scratch);
    }
  }
  llama_sampler_free(chain);
  if (!error.empty()) throwCoded(env, "LLAMA_SAMPLE_FAILED", error);
  return out;
}

void RegisterSampling(Napi::Env env, Napi::Object exports) {
  exports.Set("sampleLogits", Napi::Function::New(env, SampleLogits));
}

}  // namespace continuum
