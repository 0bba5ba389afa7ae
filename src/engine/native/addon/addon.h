// Continuum's own N-API layer over llama.cpp's C API (llama.h), linked against the prebuilt shared
// libraries of @node-llama-cpp/linux-x64. Headers come from the same llama.cpp release at install time
// (scripts/fetch-llama-headers.mjs); scripts/build-native.mjs checks that both sides match.
#pragma once

#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "llama.h"
#include "sampling.h"

#ifndef CONTINUUM_LLAMA_HEADER_VERSION
#error "CONTINUUM_LLAMA_HEADER_VERSION must be defined by scripts/build-native.mjs"
#endif
#ifndef CONTINUUM_GGML_HEADER_VERSION
#error "CONTINUUM_GGML_HEADER_VERSION must be defined by scripts/build-native.mjs"
#endif

namespace continuum {

// Owns a llama_model; shared by the JS Model wrapper and every context created from it, so a model is
// only freed once nothing uses it (whatever order the GC or env teardown runs finalizers in).
struct ModelHandle {
  llama_model* model = nullptr;
  const llama_vocab* vocab = nullptr;
  ~ModelHandle() {
    if (model != nullptr) llama_model_free(model);
  }
};

// Function pointers into the CPU backend plugin (loaded at run time, so not linkable directly).
struct CpuThreadpoolFns {
  decltype(&ggml_threadpool_new) create = nullptr;
  decltype(&ggml_threadpool_free) destroy = nullptr;
};
CpuThreadpoolFns cpuThreadpoolFns();

// Per-env data: constructors used to build wrappers from async workers.
struct AddonData {
  Napi::FunctionReference modelCtor;
  Napi::FunctionReference contextCtor;
};

// Throws a JS Error with a `code` property.
[[noreturn]] void throwCoded(Napi::Env env, const std::string& code, const std::string& message);
Napi::Error codedError(Napi::Env env, const std::string& code, const std::string& message);

// Argument helpers (throw a JS TypeError on mismatch).
int32_t argInt(const Napi::CallbackInfo& info, size_t i, const char* name);
std::string argString(const Napi::CallbackInfo& info, size_t i, const char* name);
double optNumber(const Napi::Object& o, const char* key, double fallback);
bool optBool(const Napi::Object& o, const char* key, bool fallback);
std::string optString(const Napi::Object& o, const char* key, const std::string& fallback);

class Model : public Napi::ObjectWrap<Model> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Model(const Napi::CallbackInfo& info);
  std::shared_ptr<ModelHandle> handle() const { return handle_; }
  // Throws if the model was freed.
  ModelHandle& live(Napi::Env env) const;

 private:
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Meta(const Napi::CallbackInfo& info);
  Napi::Value Tokenize(const Napi::CallbackInfo& info);
  Napi::Value TokenizeAsync(const Napi::CallbackInfo& info);
  Napi::Value TokenToPiece(const Napi::CallbackInfo& info);
  Napi::Value Detokenize(const Napi::CallbackInfo& info);
  Napi::Value IsEog(const Napi::CallbackInfo& info);
  Napi::Value ApplyChatTemplate(const Napi::CallbackInfo& info);
  Napi::Value KvBytesPerToken(const Napi::CallbackInfo& info);
  Napi::Value Free(const Napi::CallbackInfo& info);

  std::shared_ptr<ModelHandle> handle_;
};

// "f16" | "f32" | "bf16" | "q8_0" | "q4_0" -> ggml_type (throws a JS TypeError otherwise).
ggml_type parseKvType(Napi::Env env, const std::string& s);

// Bytes one KV cell (one token of one sequence) takes over all layers with the given cache types, or
// -1 when not derivable (recurrent models).
int64_t kvBytesPerToken(const llama_model* model, ggml_type typeK, ggml_type typeV);

// Defined in context.cpp.
Napi::Function DefineContext(Napi::Env env);
// allocPinnedBuffer, measureHostCopyBandwidth (host-memory.cpp)
void RegisterHostMemory(Napi::Env env, Napi::Object exports);
// The first GPU (or integrated GPU) device loaded, or null (host-memory.cpp).
ggml_backend_dev_t firstGpuDevice();
Napi::Value CreateContext(const Napi::CallbackInfo& info);

// sampler-api.cpp: a request's temperature, topK, topP, minP, seed and penalties, and its logitBias (JS
// RangeError when malformed); llama.cpp's samplers for top-k to the draw (greedy at a temperature <= 0), in
// llama-server's order, appended to a chain; one token selected with a chain, not accepted (-1 and `error`
// set when it selects nothing allowed, where llama_sampler_sample would abort); and sampleLogits, which
// samples given logits with either implementation.
SamplingParams parseSamplingParams(Napi::Env env, const Napi::Object& o);
std::vector<LogitBias> parseLogitBias(Napi::Env env, const Napi::Object& o, int32_t nVocab);
// Its `logprobs`: how many top_logprobs each sampled token reports (0..kMaxTopLogprobs), -1 when absent.
int32_t parseLogprobCount(Napi::Env env, const Napi::Object& o);
// The token ids of an optional property (an array or an Int32Array), each in [0, nVocab).
std::vector<int32_t> tokenList(Napi::Env env, const Napi::Object& o, const char* key, int32_t nVocab);
void appendSamplingStages(llama_sampler* chain, const SamplingParams& p);
llama_token sampleWithChain(llama_sampler* chain, const float* logits, int32_t nVocab,
                            std::vector<llama_token_data>& cands, std::string& error);
// One token under a constraint that `chain` applies (its grammar; then top-k to the draw) and `allowed`
// answers for one token: ours where that gives the constrained distribution, else the chain on ours'
// adjusted row. Selected, not accepted.
llama_token sampleUnder(RowSampler& own, llama_sampler* chain, const std::function<bool(int32_t)>& allowed,
                        const float* row, int32_t nVocab, SamplingScratch& scratch,
                        std::vector<llama_token_data>& cands, std::string& error);
void RegisterSampling(Napi::Env env, Napi::Object exports);

}  // namespace continuum
