// A request's sampling parameters, llama.cpp's sampler chain for them, and sampleLogits(), which samples
// given logits with either our RowSampler or llama.cpp's chain, so that the two can be held side by side
// on the same rows (the sampling bench, the tests of our sampler's distribution).
#include <cmath>

#include "addon.h"

namespace continuum {

SamplingParams parseSamplingParams(Napi::Env env, const Napi::Object& o) {
  const double temperature = optNumber(o, "temperature", 0);
  const double topK = optNumber(o, "topK", 0);
  const double topP = optNumber(o, "topP", 1);
  const double minP = optNumber(o, "minP", 0);
  const double seed = optNumber(o, "seed", LLAMA_DEFAULT_SEED);
  if (!std::isfinite(temperature) || !std::isfinite(topK) || std::isnan(topP) || std::isnan(minP)) {
    throw Napi::RangeError::New(env, "temperature, topK, topP and minP must be numbers");
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
  return p;
}

void appendStochasticStages(llama_sampler* chain, const SamplingParams& p) {
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
    const llama_token token = arr.data[arr.selected].id;
    llama_sampler_accept(chain, token);
    return token;
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
}

// sampleLogits(logits: Float32Array, nVocab, params, draws, sampler: "continuum" | "llama.cpp") -> Int32Array:
// for each row of nVocab logits, `draws` tokens in a row from one sampler made from params (temperature
// > 0), its random stream running on from draw to draw and row to row.
static Napi::Value SampleLogits(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsTypedArray() ||
      info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array || !info[2].IsObject()) {
    throw Napi::TypeError::New(env, "sampleLogits(logits: Float32Array, nVocab, params, draws, sampler)");
  }
  Napi::Float32Array logits = info[0].As<Napi::Float32Array>();
  const int32_t nVocab = argInt(info, 1, "nVocab");
  const SamplingParams params = parseSamplingParams(env, info[2].As<Napi::Object>());
  const int32_t draws = argInt(info, 3, "draws");
  const std::string sampler = argString(info, 4, "sampler");
  if (nVocab < 1 || logits.ElementLength() % static_cast<size_t>(nVocab) != 0) {
    throw Napi::RangeError::New(env, "logits must hold whole rows of nVocab");
  }
  if (draws < 0) throw Napi::RangeError::New(env, "draws must be >= 0");
  if (!(params.temperature > 0)) throw Napi::RangeError::New(env, "temperature must be > 0");
  if (sampler != "continuum" && sampler != "llama.cpp") {
    throw Napi::TypeError::New(env, "sampler must be \"continuum\" or \"llama.cpp\"");
  }
  const size_t rows = logits.ElementLength() / static_cast<size_t>(nVocab);
  Napi::Int32Array out = Napi::Int32Array::New(env, rows * static_cast<size_t>(draws));
  const float* data = logits.Data();
  if (sampler == "continuum") {
    RowSampler own(params);
    SamplingScratch scratch;
    for (size_t r = 0; r < rows; r++) {
      for (int32_t d = 0; d < draws; d++) {
        out[r * draws + d] = own.sample(data + r * nVocab, nVocab, scratch);
      }
    }
    return out;
  }
  llama_sampler_chain_params cp = llama_sampler_chain_default_params();
  cp.no_perf = true;
  llama_sampler* chain = llama_sampler_chain_init(cp);
  appendStochasticStages(chain, params);
  std::vector<llama_token_data> cands;
  std::string error;
  for (size_t r = 0; r < rows && error.empty(); r++) {
    for (int32_t d = 0; d < draws && error.empty(); d++) {
      out[r * draws + d] = sampleWithChain(chain, data + r * nVocab, nVocab, cands, error);
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
