// Module entry: version checks, logging, backend loading, model loading and the vocab/template side.
#include "addon.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <set>

namespace continuum {

// ---------------------------------------------------------------------------------------------------------
// helpers

Napi::Error codedError(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, code));
  return err;
}

void throwCoded(Napi::Env env, const std::string& code, const std::string& message) {
  throw codedError(env, code, message);
}

int32_t argInt(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (info.Length() <= i || !info[i].IsNumber()) {
    throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a number");
  }
  return info[i].As<Napi::Number>().Int32Value();
}

std::string argString(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (info.Length() <= i || !info[i].IsString()) {
    throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a string");
  }
  return info[i].As<Napi::String>().Utf8Value();
}

double optNumber(const Napi::Object& o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

bool optBool(const Napi::Object& o, const char* key, bool fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

std::string optString(const Napi::Object& o, const char* key, const std::string& fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

static Napi::Value tokenOrNull(Napi::Env env, llama_token t) {
  if (t == LLAMA_TOKEN_NULL) return env.Null();
  return Napi::Number::New(env, t);
}

// ---------------------------------------------------------------------------------------------------------
// logging: llama.cpp and ggml log through one callback; we filter by level (default: warnings and errors).

static std::atomic<int> g_minLogLevel{GGML_LOG_LEVEL_WARN};
static std::atomic<int> g_lastLogLevel{GGML_LOG_LEVEL_INFO};

static void logCallback(ggml_log_level level, const char* text, void* /*user*/) {
  int lvl = level;
  if (level == GGML_LOG_LEVEL_CONT) {
    lvl = g_lastLogLevel.load();
  } else {
    g_lastLogLevel.store(level);
  }
  const int min = g_minLogLevel.load();
  if (min == GGML_LOG_LEVEL_NONE || lvl < min) return;
  // With one KV pool shared by every sequence, llama.cpp compares the whole pool with the model's trained
  // context and warns of an overflow; each sequence is bounded by the trained context on our side, so the
  // warning is never true here, and it would be the first line every `serve` prints.
  if (lvl == GGML_LOG_LEVEL_WARN && std::strstr(text, "possible training context overflow") != nullptr) return;
  std::fputs(text, stderr);
}

static int parseLogLevel(const std::string& s) {
  if (s == "debug") return GGML_LOG_LEVEL_DEBUG;
  if (s == "info") return GGML_LOG_LEVEL_INFO;
  if (s == "warn") return GGML_LOG_LEVEL_WARN;
  if (s == "error") return GGML_LOG_LEVEL_ERROR;
  if (s == "none") return GGML_LOG_LEVEL_NONE;
  return -1;
}

static Napi::Value SetLogLevel(const Napi::CallbackInfo& info) {
  const int lvl = parseLogLevel(argString(info, 0, "level"));
  if (lvl < 0) throw Napi::TypeError::New(info.Env(), "level must be debug|info|warn|error|none");
  g_minLogLevel.store(lvl);
  return info.Env().Undefined();
}

// ---------------------------------------------------------------------------------------------------------
// versions

static bool runtimeLlamaVersionMatches(const char* runtime) {
  // Untagged builds report "<base>-dev"; the headers declare "<base>".
  const std::string want = CONTINUUM_LLAMA_HEADER_VERSION;
  const std::string got = runtime != nullptr ? runtime : "";
  return got == want || got.rfind(want + "-", 0) == 0;
}

static Napi::Value VersionInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("headerLlamaVersion", CONTINUUM_LLAMA_HEADER_VERSION);
  o.Set("headerGgmlVersion", CONTINUUM_GGML_HEADER_VERSION);
  o.Set("libLlamaVersion", llama_version());
  o.Set("libGgmlVersion", ggml_version());
  o.Set("libGgmlCommit", ggml_commit());
  o.Set("maxParallelSequences", Napi::Number::New(env, static_cast<double>(llama_max_parallel_sequences())));
  o.Set("supportsGpuOffload", Napi::Boolean::New(env, llama_supports_gpu_offload()));
  o.Set("supportsMmap", Napi::Boolean::New(env, llama_supports_mmap()));
  return o;
}

static Napi::Value SystemInfo(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), llama_print_system_info());
}

// ---------------------------------------------------------------------------------------------------------
// backends

static std::mutex g_backendMutex;
static std::set<std::string> g_loadedBackendPaths;

// Directory the linked libllama was loaded from (the prebuilt package's bin dir).
static std::string linkedLibraryDir() {
  Dl_info dl{};
  if (dladdr(reinterpret_cast<void*>(&llama_backend_init), &dl) == 0 || dl.dli_fname == nullptr) return "";
  std::string path = dl.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

static const char* devTypeName(enum ggml_backend_dev_type t) {
  switch (t) {
    case GGML_BACKEND_DEVICE_TYPE_CPU:
      return "cpu";
    case GGML_BACKEND_DEVICE_TYPE_GPU:
      return "gpu";
    case GGML_BACKEND_DEVICE_TYPE_IGPU:
      return "igpu";
    case GGML_BACKEND_DEVICE_TYPE_ACCEL:
      return "accel";
    default:
      return "other";
  }
}

static Napi::Array devicesArray(Napi::Env env) {
  Napi::Array arr = Napi::Array::New(env);
  const size_t n = ggml_backend_dev_count();
  for (size_t i = 0; i < n; i++) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    Napi::Object d = Napi::Object::New(env);
    size_t freeMem = 0;
    size_t totalMem = 0;
    ggml_backend_dev_memory(dev, &freeMem, &totalMem);
    d.Set("name", ggml_backend_dev_name(dev));
    d.Set("description", ggml_backend_dev_description(dev));
    d.Set("type", devTypeName(ggml_backend_dev_type(dev)));
    d.Set("backend", ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev)));
    d.Set("memoryFree", Napi::Number::New(env, static_cast<double>(freeMem)));
    d.Set("memoryTotal", Napi::Number::New(env, static_cast<double>(totalMem)));
    arr.Set(static_cast<uint32_t>(i), d);
  }
  return arr;
}

// loadBackends(dir?: string, extraPluginPaths?: string[], cpuVariant?: string)
//   -> { dir, loaded: string[], failed: string[], devices }
// `dir` (default: the linked libllama's directory) gets ggml_backend_load_all_from_path, which picks the best
// CPU variant (libggml-cpu-<arch>.so) and any GPU plugins there; with `cpuVariant` only
// `dir`/libggml-cpu-<cpuVariant>.so is loaded (ggml refuses a variant this CPU cannot run). Extra paths are
// single plugins (e.g. a CUDA backend from another package). Idempotent per path.
static Napi::Value LoadBackends(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string dir = (info.Length() > 0 && info[0].IsString()) ? info[0].As<Napi::String>().Utf8Value() : "";
  if (dir.empty()) dir = linkedLibraryDir();
  std::string cpuVariant = (info.Length() > 2 && info[2].IsString()) ? info[2].As<Napi::String>().Utf8Value() : "";
  Napi::Array loaded = Napi::Array::New(env);
  Napi::Array failed = Napi::Array::New(env);
  std::lock_guard<std::mutex> lock(g_backendMutex);
  if (cpuVariant.empty()) {
    if (g_loadedBackendPaths.insert("dir:" + dir).second) ggml_backend_load_all_from_path(dir.c_str());
  } else {
    std::string path = dir + "/libggml-cpu-" + cpuVariant + ".so";
    if (g_loadedBackendPaths.insert("lib:" + path).second && ggml_backend_load(path.c_str()) == nullptr) {
      g_loadedBackendPaths.erase("lib:" + path);
      throwCoded(env, "LLAMA_CPU_VARIANT",
                 "the CPU backend variant '" + cpuVariant + "' (" + path +
                     ") is missing or cannot run on this CPU");
    }
  }
  if (info.Length() > 1 && info[1].IsArray()) {
    Napi::Array extra = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < extra.Length(); i++) {
      std::string p = extra.Get(i).As<Napi::String>().Utf8Value();
      if (!g_loadedBackendPaths.insert("lib:" + p).second) continue;
      if (ggml_backend_load(p.c_str()) != nullptr) {
        loaded.Set(loaded.Length(), p);
      } else {
        g_loadedBackendPaths.erase("lib:" + p);
        failed.Set(failed.Length(), p);
      }
    }
  }
  if (ggml_backend_reg_by_name("CPU") == nullptr) {
    throwCoded(env, "LLAMA_NO_CPU_BACKEND", "no CPU backend could be loaded from " + dir);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("dir", dir);
  out.Set("loaded", loaded);
  out.Set("failed", failed);
  out.Set("devices", devicesArray(env));
  return out;
}

static Napi::Value Devices(const Napi::CallbackInfo& info) { return devicesArray(info.Env()); }

CpuThreadpoolFns cpuThreadpoolFns() {
  CpuThreadpoolFns fns;
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
  if (reg == nullptr) return fns;
  fns.create = reinterpret_cast<decltype(&ggml_threadpool_new)>(
      ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new"));
  fns.destroy = reinterpret_cast<decltype(&ggml_threadpool_free)>(
      ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free"));
  return fns;
}

// ---------------------------------------------------------------------------------------------------------
// model loading (async)

class LoadModelWorker : public Napi::AsyncWorker {
 public:
  LoadModelWorker(Napi::Env env, std::string path, llama_model_params params,
                  std::vector<llama_model_tensor_buft_override> overrides)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), path_(std::move(path)),
        params_(params), overrides_(std::move(overrides)) {
    if (!overrides_.empty()) {
      overrides_.push_back({nullptr, nullptr});
      params_.tensor_buft_overrides = overrides_.data();
    }
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      model_ = llama_model_load_from_file(path_.c_str(), params_);
    } catch (const std::exception& e) {
      SetError(e.what());
      return;
    }
    if (model_ == nullptr) SetError("failed to load model from " + path_);
  }
  void OnOK() override {
    Napi::Env env = Env();
    auto* data = env.GetInstanceData<AddonData>();
    auto* handle = new std::shared_ptr<ModelHandle>(std::make_shared<ModelHandle>());
    (*handle)->model = model_;
    (*handle)->vocab = llama_model_get_vocab(model_);
    model_ = nullptr;
    Napi::External<std::shared_ptr<ModelHandle>> ext = Napi::External<std::shared_ptr<ModelHandle>>::New(
        env, handle, [](Napi::Env, std::shared_ptr<ModelHandle>* p) { delete p; });
    deferred_.Resolve(data->modelCtor.New({ext}));
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(codedError(Env(), "LLAMA_MODEL_LOAD_FAILED", e.Message()).Value());
  }
  ~LoadModelWorker() override {
    if (model_ != nullptr) llama_model_free(model_);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string path_;
  llama_model_params params_;
  std::vector<llama_model_tensor_buft_override> overrides_;  // what params_.tensor_buft_overrides points at
  llama_model* model_ = nullptr;
};

// loadModel(path, { gpuLayers?: number (-1 = all), vocabOnly?: boolean, mmap?: boolean,
//   embeddingsOnGpu?: boolean (the token embeddings on the first GPU; llama.cpp keeps them on the CPU) })
//   -> Promise<Model>
static Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path = argString(info, 0, "path");
  Napi::Object opts = (info.Length() > 1 && info[1].IsObject()) ? info[1].As<Napi::Object>() : Napi::Object::New(env);
  if (ggml_backend_dev_count() == 0) {
    throwCoded(env, "LLAMA_NO_BACKENDS", "no ggml backends loaded: call loadBackends() first");
  }
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = static_cast<int32_t>(optNumber(opts, "gpuLayers", 0));
  params.vocab_only = optBool(opts, "vocabOnly", false);
  if (opts.Has("mmap")) params.load_mode = optBool(opts, "mmap", true) ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
  std::vector<llama_model_tensor_buft_override> overrides;
  if (optBool(opts, "embeddingsOnGpu", false)) {
    if (ggml_backend_dev_t gpu = firstGpuDevice(); gpu != nullptr) {
      overrides.push_back({"^token_embd\\.weight$", ggml_backend_dev_buffer_type(gpu)});
    }
  }
  auto* worker = new LoadModelWorker(env, path, params, std::move(overrides));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

// ---------------------------------------------------------------------------------------------------------
// Model

Napi::Function Model::Define(Napi::Env env) {
  return DefineClass(env, "LlamaModel",
                     {
                         InstanceMethod<&Model::Info>("info"),
                         InstanceMethod<&Model::Meta>("meta"),
                         InstanceMethod<&Model::Tokenize>("tokenize"),
                         InstanceMethod<&Model::TokenizeAsync>("tokenizeAsync"),
                         InstanceMethod<&Model::TokenToPiece>("tokenToPiece"),
                         InstanceMethod<&Model::Detokenize>("detokenize"),
                         InstanceMethod<&Model::IsEog>("isEog"),
                         InstanceMethod<&Model::ApplyChatTemplate>("applyChatTemplate"),
                         InstanceMethod<&Model::KvBytesPerToken>("kvBytesPerToken"),
                         InstanceMethod<&Model::Free>("free"),
                     });
}

Model::Model(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Model>(info) {
  if (info.Length() != 1 || !info[0].IsExternal()) {
    throw Napi::TypeError::New(info.Env(), "LlamaModel cannot be constructed directly: use loadModel()");
  }
  // Take ownership: the External is only a courier and must not keep the model alive until GC.
  handle_ = std::move(*info[0].As<Napi::External<std::shared_ptr<ModelHandle>>>().Data());
}

ModelHandle& Model::live(Napi::Env env) const {
  if (!handle_) throwCoded(env, "LLAMA_MODEL_FREED", "model was freed");
  return *handle_;
}

static std::string metaString(const llama_model* model, const std::string& key, bool* found) {
  std::vector<char> buf(256);
  int32_t n = llama_model_meta_val_str(model, key.c_str(), buf.data(), buf.size());
  if (n < 0) {
    *found = false;
    return "";
  }
  if (static_cast<size_t>(n) >= buf.size()) {
    buf.resize(static_cast<size_t>(n) + 1);
    n = llama_model_meta_val_str(model, key.c_str(), buf.data(), buf.size());
  }
  *found = true;
  return std::string(buf.data(), static_cast<size_t>(n));
}

int64_t kvBytesPerToken(const llama_model* model, ggml_type typeK, ggml_type typeV) {
  if (llama_model_is_recurrent(model)) return -1;
  bool found = false;
  const std::string arch = metaString(model, "general.architecture", &found);
  const int64_t nHead = llama_model_n_head(model);
  const int64_t nHeadKv = llama_model_n_head_kv(model);
  const int64_t nEmbd = llama_model_n_embd(model);
  const int64_t nLayer = llama_model_n_layer(model);
  if (nHead <= 0 || nHeadKv <= 0) return -1;
  int64_t kLen = nEmbd / nHead;
  int64_t vLen = kLen;
  std::string s = metaString(model, arch + ".attention.key_length", &found);
  if (found) kLen = std::stoll(s);
  s = metaString(model, arch + ".attention.value_length", &found);
  if (found) vLen = std::stoll(s);
  const int64_t perLayer = static_cast<int64_t>(ggml_row_size(typeK, nHeadKv * kLen)) +
                           static_cast<int64_t>(ggml_row_size(typeV, nHeadKv * vLen));
  return perLayer * nLayer;
}

Napi::Value Model::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  const llama_model* m = h.model;
  const llama_vocab* v = h.vocab;
  Napi::Object o = Napi::Object::New(env);
  char desc[256];
  llama_model_desc(m, desc, sizeof(desc));
  o.Set("description", desc);
  o.Set("nVocab", llama_vocab_n_tokens(v));
  o.Set("nCtxTrain", llama_model_n_ctx_train(m));
  o.Set("nEmbd", llama_model_n_embd(m));
  o.Set("nLayer", llama_model_n_layer(m));
  o.Set("nHead", llama_model_n_head(m));
  o.Set("nHeadKv", llama_model_n_head_kv(m));
  o.Set("nSwa", llama_model_n_swa(m));
  o.Set("nParams", Napi::Number::New(env, static_cast<double>(llama_model_n_params(m))));
  o.Set("sizeBytes", Napi::Number::New(env, static_cast<double>(llama_model_size(m))));
  o.Set("isRecurrent", Napi::Boolean::New(env, llama_model_is_recurrent(m)));
  o.Set("isHybrid", Napi::Boolean::New(env, llama_model_is_hybrid(m)));
  const char* tmpl = llama_model_chat_template(m, nullptr);
  o.Set("chatTemplate", tmpl != nullptr ? Napi::Value(Napi::String::New(env, tmpl)) : env.Null());
  // tokenizer.chat_template.tool_use: the template for requests with tools, where a model ships one apart
  const char* toolUse = llama_model_chat_template(m, "tool_use");
  o.Set("chatTemplateToolUse", toolUse != nullptr ? Napi::Value(Napi::String::New(env, toolUse)) : env.Null());
  o.Set("bos", tokenOrNull(env, llama_vocab_bos(v)));
  o.Set("eos", tokenOrNull(env, llama_vocab_eos(v)));
  o.Set("eot", tokenOrNull(env, llama_vocab_eot(v)));
  o.Set("nl", tokenOrNull(env, llama_vocab_nl(v)));
  o.Set("addBos", Napi::Boolean::New(env, llama_vocab_get_add_bos(v)));
  o.Set("addEos", Napi::Boolean::New(env, llama_vocab_get_add_eos(v)));
  const int64_t kvb = kvBytesPerToken(m, GGML_TYPE_F16, GGML_TYPE_F16);
  o.Set("kvBytesPerTokenF16", kvb >= 0 ? Napi::Value(Napi::Number::New(env, static_cast<double>(kvb))) : env.Null());
  return o;
}

Napi::Value Model::Meta(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  bool found = false;
  std::string s = metaString(h.model, argString(info, 0, "key"), &found);
  return found ? Napi::Value(Napi::String::New(env, s)) : env.Null();
}

// The tokens of `text`; false (with `error` set) when llama.cpp cannot tokenize it. Reads the vocabulary only,
// so it may run on a worker thread.
static bool tokenizeText(const llama_vocab* vocab, const std::string& text, bool addSpecial, bool parseSpecial,
                         std::vector<llama_token>* toks, std::string* error) {
  toks->resize(text.size() + 8);
  int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), toks->data(),
                             static_cast<int32_t>(toks->size()), addSpecial, parseSpecial);
  if (n == INT32_MIN) {
    *error = "tokenization overflow";
    return false;
  }
  if (n < 0) {
    toks->resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), toks->data(),
                       static_cast<int32_t>(toks->size()), addSpecial, parseSpecial);
    if (n < 0) {
      *error = "tokenization failed";
      return false;
    }
  }
  toks->resize(static_cast<size_t>(n));
  return true;
}

static Napi::Int32Array int32ArrayOf(Napi::Env env, const std::vector<llama_token>& toks) {
  Napi::Int32Array out = Napi::Int32Array::New(env, toks.size());
  std::memcpy(out.Data(), toks.data(), toks.size() * sizeof(llama_token));
  return out;
}

// tokenize(text, addSpecial, parseSpecial) -> Int32Array
Napi::Value Model::Tokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  const std::string text = argString(info, 0, "text");
  const bool addSpecial = info.Length() > 1 && info[1].ToBoolean().Value();
  const bool parseSpecial = info.Length() > 2 && info[2].ToBoolean().Value();
  std::vector<llama_token> toks;
  std::string error;
  if (!tokenizeText(h.vocab, text, addSpecial, parseSpecial, &toks, &error)) {
    throwCoded(env, "LLAMA_TOKENIZE_FAILED", error);
  }
  return int32ArrayOf(env, toks);
}

// Tokenizes on a libuv worker thread: a long prompt does not hold the event loop. The worker shares the
// model's handle, so the vocabulary outlives it.
class TokenizeWorker : public Napi::AsyncWorker {
 public:
  TokenizeWorker(Napi::Env env, std::shared_ptr<ModelHandle> handle, std::string text, bool addSpecial,
                 bool parseSpecial)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), handle_(std::move(handle)),
        text_(std::move(text)), addSpecial_(addSpecial), parseSpecial_(parseSpecial) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    std::string error;
    if (!tokenizeText(handle_->vocab, text_, addSpecial_, parseSpecial_, &toks_, &error)) SetError(error);
  }
  void OnOK() override {
    deferred_.Resolve(int32ArrayOf(Env(), toks_));
    handle_.reset();
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(codedError(Env(), "LLAMA_TOKENIZE_FAILED", e.Message()).Value());
    handle_.reset();
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<ModelHandle> handle_;
  std::string text_;
  bool addSpecial_;
  bool parseSpecial_;
  std::vector<llama_token> toks_;
};

// tokenizeAsync(text, addSpecial, parseSpecial) -> Promise<Int32Array>
Napi::Value Model::TokenizeAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  live(env);
  auto* worker = new TokenizeWorker(env, handle_, argString(info, 0, "text"),
                                    info.Length() > 1 && info[1].ToBoolean().Value(),
                                    info.Length() > 2 && info[2].ToBoolean().Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

static std::string pieceOf(const llama_vocab* vocab, llama_token token, bool special) {
  std::string buf(32, '\0');
  int32_t n = llama_token_to_piece(vocab, token, buf.data(), static_cast<int32_t>(buf.size()), 0, special);
  if (n < 0) {
    buf.resize(static_cast<size_t>(-n));
    n = llama_token_to_piece(vocab, token, buf.data(), static_cast<int32_t>(buf.size()), 0, special);
  }
  buf.resize(static_cast<size_t>(n < 0 ? 0 : n));
  return buf;
}

static void checkToken(Napi::Env env, const llama_vocab* vocab, int32_t token) {
  if (token < 0 || token >= llama_vocab_n_tokens(vocab)) {
    throw Napi::RangeError::New(env, "token " + std::to_string(token) + " out of range");
  }
}

// tokenToPiece(token, special) -> Buffer (raw bytes: a piece can be part of a UTF-8 sequence)
Napi::Value Model::TokenToPiece(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  const int32_t token = argInt(info, 0, "token");
  checkToken(env, h.vocab, token);
  const bool special = info.Length() > 1 && info[1].ToBoolean().Value();
  std::string piece = pieceOf(h.vocab, token, special);
  return Napi::Buffer<char>::Copy(env, piece.data(), piece.size());
}

// detokenize(tokens: Int32Array, removeSpecial, unparseSpecial) -> string
Napi::Value Model::Detokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  if (info.Length() < 1 || !info[0].IsTypedArray() ||
      info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throw Napi::TypeError::New(env, "tokens must be an Int32Array");
  }
  Napi::Int32Array toks = info[0].As<Napi::Int32Array>();
  for (size_t i = 0; i < toks.ElementLength(); i++) checkToken(env, h.vocab, toks[i]);
  const bool removeSpecial = info.Length() > 1 && info[1].ToBoolean().Value();
  const bool unparseSpecial = info.Length() > 2 && info[2].ToBoolean().Value();
  std::string text(toks.ElementLength() * 8 + 16, '\0');
  int32_t n = llama_detokenize(h.vocab, toks.Data(), static_cast<int32_t>(toks.ElementLength()), text.data(),
                               static_cast<int32_t>(text.size()), removeSpecial, unparseSpecial);
  if (n < 0) {
    text.resize(static_cast<size_t>(-n));
    n = llama_detokenize(h.vocab, toks.Data(), static_cast<int32_t>(toks.ElementLength()), text.data(),
                         static_cast<int32_t>(text.size()), removeSpecial, unparseSpecial);
    if (n < 0) throwCoded(env, "LLAMA_DETOKENIZE_FAILED", "detokenization failed");
  }
  text.resize(static_cast<size_t>(n));
  return Napi::String::New(env, text);
}

Napi::Value Model::IsEog(const Napi::CallbackInfo& info) {
  ModelHandle& h = live(info.Env());
  const int32_t token = argInt(info, 0, "token");
  checkToken(info.Env(), h.vocab, token);
  return Napi::Boolean::New(info.Env(), llama_vocab_is_eog(h.vocab, token));
}

// applyChatTemplate(messages: {role, content}[], addAssistant: boolean, template?: string) -> string
Napi::Value Model::ApplyChatTemplate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  if (info.Length() < 1 || !info[0].IsArray()) throw Napi::TypeError::New(env, "messages must be an array");
  Napi::Array arr = info[0].As<Napi::Array>();
  const bool addAssistant = info.Length() > 1 && info[1].ToBoolean().Value();
  std::string tmpl;
  if (info.Length() > 2 && info[2].IsString()) {
    tmpl = info[2].As<Napi::String>().Utf8Value();
  } else {
    const char* t = llama_model_chat_template(h.model, nullptr);
    if (t == nullptr) throwCoded(env, "LLAMA_NO_CHAT_TEMPLATE", "model has no chat template");
    tmpl = t;
  }
  std::vector<std::string> strings;
  strings.reserve(arr.Length() * 2);
  size_t total = 0;
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value item = arr.Get(i);
    if (!item.IsObject()) throw Napi::TypeError::New(env, "each message must be {role, content}");
    Napi::Object m = item.As<Napi::Object>();
    strings.push_back(optString(m, "role", ""));
    strings.push_back(optString(m, "content", ""));
    total += strings[strings.size() - 1].size() + strings[strings.size() - 2].size();
  }
  std::vector<llama_chat_message> msgs(arr.Length());
  for (size_t i = 0; i < msgs.size(); i++) {
    msgs[i].role = strings[2 * i].c_str();
    msgs[i].content = strings[2 * i + 1].c_str();
  }
  std::string buf(total * 2 + 256, '\0');
  int32_t n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), addAssistant, buf.data(),
                                        static_cast<int32_t>(buf.size()));
  if (n < 0) throwCoded(env, "LLAMA_CHAT_TEMPLATE_UNSUPPORTED", "chat template not supported by llama.cpp");
  if (static_cast<size_t>(n) > buf.size()) {
    buf.resize(static_cast<size_t>(n));
    n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), addAssistant, buf.data(),
                                  static_cast<int32_t>(buf.size()));
  }
  buf.resize(static_cast<size_t>(n));
  return Napi::String::New(env, buf);
}

ggml_type parseKvType(Napi::Env env, const std::string& s) {
  if (s == "f16") return GGML_TYPE_F16;
  if (s == "f32") return GGML_TYPE_F32;
  if (s == "bf16") return GGML_TYPE_BF16;
  if (s == "q8_0") return GGML_TYPE_Q8_0;
  if (s == "q4_0") return GGML_TYPE_Q4_0;
  throw Napi::TypeError::New(env, "kv type must be f16|f32|bf16|q8_0|q4_0");
}

// kvBytesPerToken(typeK = "f16", typeV = typeK) -> number | null
Napi::Value Model::KvBytesPerToken(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ModelHandle& h = live(env);
  const std::string k = (info.Length() > 0 && info[0].IsString()) ? info[0].As<Napi::String>().Utf8Value() : "f16";
  const std::string v = (info.Length() > 1 && info[1].IsString()) ? info[1].As<Napi::String>().Utf8Value() : k;
  const int64_t n = kvBytesPerToken(h.model, parseKvType(env, k), parseKvType(env, v));
  return n >= 0 ? Napi::Value(Napi::Number::New(env, static_cast<double>(n))) : env.Null();
}

Napi::Value Model::Free(const Napi::CallbackInfo& info) {
  if (handle_ && handle_.use_count() > 1) {
    throwCoded(info.Env(), "LLAMA_MODEL_IN_USE", "model still has live contexts: free them first");
  }
  handle_.reset();
  return info.Env().Undefined();
}

// ---------------------------------------------------------------------------------------------------------
// module init

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  if (!runtimeLlamaVersionMatches(llama_version()) ||
      std::strcmp(ggml_version(), CONTINUUM_GGML_HEADER_VERSION) != 0) {
    throwCoded(env, "LLAMA_VERSION_MISMATCH",
               std::string("llama.cpp header/library mismatch: built against llama ") +
                   CONTINUUM_LLAMA_HEADER_VERSION + " / ggml " + CONTINUUM_GGML_HEADER_VERSION +
                   " headers but loaded libllama " + llama_version() + " / ggml " + ggml_version() +
                   "; rebuild with `node scripts/build-native.mjs`");
  }
  llama_log_set(logCallback, nullptr);
  llama_backend_init();

  auto* data = new AddonData();
  data->modelCtor = Napi::Persistent(Model::Define(env));
  data->contextCtor = Napi::Persistent(DefineContext(env));
  env.SetInstanceData<AddonData>(data);

  exports.Set("versionInfo", Napi::Function::New(env, VersionInfo));
  exports.Set("systemInfo", Napi::Function::New(env, SystemInfo));
  exports.Set("setLogLevel", Napi::Function::New(env, SetLogLevel));
  exports.Set("loadBackends", Napi::Function::New(env, LoadBackends));
  exports.Set("devices", Napi::Function::New(env, Devices));
  exports.Set("loadModel", Napi::Function::New(env, LoadModel));
  exports.Set("createContext", Napi::Function::New(env, CreateContext));
  exports.Set("LlamaModel", data->modelCtor.Value());
  exports.Set("LlamaContext", data->contextCtor.Value());
  RegisterHostMemory(env, exports);
  RegisterSampling(env, exports);
  return exports;
}

}  // namespace continuum

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return continuum::Init(env, exports); }

NODE_API_MODULE(continuum_llama, InitModule)
