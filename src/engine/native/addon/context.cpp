// LlamaContext: one llama_context with a unified KV pool shared by up to n_seq_max sequences, a persistent
// ggml threadpool, per-sequence sampler chains, async decode/state workers, and the llama_memory_* ops.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>

#include "addon.h"
#include "logprobs.h"

namespace continuum {

namespace {

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* kvTypeName(ggml_type t) {
  switch (t) {
    case GGML_TYPE_F16:
      return "f16";
    case GGML_TYPE_F32:
      return "f32";
    case GGML_TYPE_BF16:
      return "bf16";
    case GGML_TYPE_Q8_0:
      return "q8_0";
    case GGML_TYPE_Q4_0:
      return "q4_0";
    default:
      return ggml_type_name(t);
  }
}

}  // namespace

// Everything native a context owns. Shared with in-flight workers so teardown order cannot free it early.
struct ContextState {
  std::shared_ptr<ModelHandle> model;
  llama_context* ctx = nullptr;
  CpuThreadpoolFns fns;
  ggml_threadpool_t tp = nullptr;
  ggml_threadpool_t tpBatch = nullptr;
  llama_batch batch{};
  bool batchAllocated = false;
  // per sequence slot: our sampler (anything but plain greedy), and with a grammar llama.cpp's chain (the
  // grammar, then top-k to the draw), which samples ours' adjusted row where ours cannot give the
  // constrained distribution (sampleUnder); neither = greedy
  std::vector<std::unique_ptr<RowSampler>> rowSamplers;
  std::vector<llama_sampler*> samplers;
  std::vector<llama_sampler*> grammars;  // per slot, non-owning: the chain's grammar stage, if any
  std::vector<int32_t> logprobCounts;    // per slot: top_logprobs of each sampled token (-1: no logprobs)
  uint32_t nSeqMax = 1;
  uint32_t nBatch = 0;
  int32_t threads = 1;
  int32_t threadsBatch = 1;
  int32_t flashAttn = -1;  // requested: -1 auto, 0 off, 1 on
  bool kvUnified = true;
  ggml_type typeK = GGML_TYPE_F16;
  ggml_type typeV = GGML_TYPE_F16;
  // computeTiming: a llama_decode's wall time in four phases, each summed over micro-batches: preparing a
  // micro-batch on the host (until ggml's scheduler first asks about a node), its inputs (the CPU's part of
  // the graph, the token embeddings, and the uploads, until the first layer's input norm), the model's
  // compute (from there to the logits), and the rest (copying outputs out, llama.cpp's bookkeeping)
  bool computeTiming = false;
  int64_t phaseMarkUs = -1;  // when the current phase began
  bool inUbatch = false;     // between a micro-batch's first node and its logits
  int64_t prepareUs = 0;
  int64_t inputsUs = 0;
  int64_t computeUs = 0;
  int32_t computeSpans = 0;

  ~ContextState() {
    for (llama_sampler* s : samplers) {
      if (s != nullptr) llama_sampler_free(s);
    }
    if (batchAllocated) llama_batch_free(batch);
    if (ctx != nullptr) {
      llama_detach_threadpool(ctx);
      llama_free(ctx);
    }
    if (fns.destroy != nullptr) {
      if (tpBatch != nullptr && tpBatch != tp) fns.destroy(tpBatch);
      if (tp != nullptr) fns.destroy(tp);
    }
  }
};

// The model's compute of one micro-batch, as a GPU's own clock would see it: ggml's scheduler synchronizes
// its backend at each tensor this callback asks for, so the time from the first layer's input norm (inputs
// built and copied, graph launched) to the logits (all of the model's kernels finished, before the logits are
// copied out) excludes the host work of a step: graph building, the attention mask, uploads, output copies.
constexpr const char* kComputeStartTensor = "attn_norm-0";
constexpr const char* kComputeEndTensor = "result_output";

static bool computeTimingCallback(ggml_tensor* t, bool ask, void* user) {
  auto* s = static_cast<ContextState*>(user);
  const bool start = std::strcmp(t->name, kComputeStartTensor) == 0;
  const bool end = std::strcmp(t->name, kComputeEndTensor) == 0;
  if (ask) {
    if (!s->inUbatch) {
      const int64_t now = nowUs();
      s->prepareUs += now - s->phaseMarkUs;
      s->phaseMarkUs = now;
      s->inUbatch = true;
    }
    return start || end;
  }
  const int64_t now = nowUs();
  if (start) {
    s->inputsUs += now - s->phaseMarkUs;
    s->phaseMarkUs = now;
  } else if (end && s->inUbatch) {
    s->computeUs += now - s->phaseMarkUs;
    s->computeSpans++;
    s->phaseMarkUs = now;
    s->inUbatch = false;
  }
  return true;
}

class DecodeWorker;

class Context : public Napi::ObjectWrap<Context> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Context(const Napi::CallbackInfo& info);

  std::shared_ptr<ContextState> state() const { return st_; }
  bool busy = false;

 private:
  ContextState& idle(Napi::Env env);
  int32_t seqArg(const Napi::CallbackInfo& info, size_t i, bool allowAny = false);

  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value SetSampler(const Napi::CallbackInfo& info);
  Napi::Value ResetSampler(const Napi::CallbackInfo& info);
  Napi::Value AcceptToken(const Napi::CallbackInfo& info);
  Napi::Value Decode(const Napi::CallbackInfo& info);
  Napi::Value DecodeSync(const Napi::CallbackInfo& info);
  DecodeWorker* PrepareDecode(const Napi::CallbackInfo& info);
  Napi::Value MemClear(const Napi::CallbackInfo& info);
  Napi::Value MemSeqRm(const Napi::CallbackInfo& info);
  Napi::Value MemSeqCp(const Napi::CallbackInfo& info);
  Napi::Value MemSeqKeep(const Napi::CallbackInfo& info);
  Napi::Value MemSeqAdd(const Napi::CallbackInfo& info);
  Napi::Value MemSeqPosMin(const Napi::CallbackInfo& info);
  Napi::Value MemSeqPosMax(const Napi::CallbackInfo& info);
  Napi::Value MemCanShift(const Napi::CallbackInfo& info);
  Napi::Value StateSeqSize(const Napi::CallbackInfo& info);
  Napi::Value StateSeqSave(const Napi::CallbackInfo& info);
  Napi::Value StateSeqSaveInto(const Napi::CallbackInfo& info);
  Napi::Value StateSeqLoad(const Napi::CallbackInfo& info);
  Napi::Value StateSeqSaveFile(const Napi::CallbackInfo& info);
  Napi::Value StateSeqLoadFile(const Napi::CallbackInfo& info);
  Napi::Value Free(const Napi::CallbackInfo& info);

  std::shared_ptr<ContextState> st_;
};

// ---------------------------------------------------------------------------------------------------------
// async plumbing: every worker on a context marks it busy (sync ops refuse to run meanwhile) and keeps the
// JS object alive until it settles.

class ContextWorker : public Napi::AsyncWorker {
 public:
  ContextWorker(Context* owner, const Napi::Object& self)
      : Napi::AsyncWorker(self.Env()), deferred_(Napi::Promise::Deferred::New(self.Env())), owner_(owner),
        st_(owner->state()) {
    self_ = Napi::Persistent(self);
    owner_->busy = true;
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void OnOK() final {
    owner_->busy = false;
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    deferred_.Resolve(Result(env));
  }
  void OnError(const Napi::Error& e) final {
    owner_->busy = false;
    deferred_.Reject(FailureError(Env(), e.Message()).Value());
  }

 protected:
  virtual Napi::Value Result(Napi::Env env) = 0;
  void Fail(const std::string& code, const std::string& message, int32_t status = 0) {
    code_ = code;
    status_ = status;
    message_ = message;
    failed_ = true;
    SetError(message);
  }
  /** The error the op fails with: rejected by the async path, thrown by the synchronous one. */
  Napi::Error FailureError(Napi::Env env, const std::string& message) const {
    Napi::Error err = codedError(env, code_, message);
    if (status_ != 0) err.Set("status", Napi::Number::New(env, status_));
    return err;
  }

  Napi::Promise::Deferred deferred_;
  Context* owner_;
  std::shared_ptr<ContextState> st_;
  Napi::ObjectReference self_;
  std::string code_ = "LLAMA_ERROR";
  std::string message_;
  bool failed_ = false;
  int32_t status_ = 0;
};

// ---------------------------------------------------------------------------------------------------------
// creation

class CreateContextWorker : public Napi::AsyncWorker {
 public:
  CreateContextWorker(Napi::Env env, std::shared_ptr<ModelHandle> model, llama_context_params params,
                      uint32_t poll)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), params_(params), poll_(poll) {
    st_ = std::make_shared<ContextState>();
    st_->model = std::move(model);
    st_->nSeqMax = params.n_seq_max;
    st_->threads = params.n_threads;
    st_->threadsBatch = params.n_threads_batch;
    st_->flashAttn = params.flash_attn_type;
    st_->kvUnified = params.kv_unified;
    st_->typeK = params.type_k;
    st_->typeV = params.type_v;
    st_->computeTiming = params.cb_eval != nullptr;
    params_.cb_eval_user_data = st_.get();
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    ContextState& s = *st_;
    try {
      s.ctx = llama_init_from_model(s.model->model, params_);
    } catch (const std::exception& e) {
      SetError(e.what());
      return;
    }
    if (s.ctx == nullptr) {
      SetError("llama_init_from_model failed (see log; too large n_ctx or unsupported options?)");
      return;
    }
    // Our own persistent threadpools: explicit sizes, created once, reused by every decode.
    s.fns = cpuThreadpoolFns();
    if (s.fns.create != nullptr && s.fns.destroy != nullptr) {
      ggml_threadpool_params tpp = ggml_threadpool_params_default(s.threads);
      tpp.poll = poll_;
      s.tp = s.fns.create(&tpp);
      if (s.threadsBatch != s.threads) {
        ggml_threadpool_params tpb = ggml_threadpool_params_default(s.threadsBatch);
        tpb.poll = poll_;
        s.tpBatch = s.fns.create(&tpb);
      } else {
        s.tpBatch = s.tp;
      }
      if (s.tp == nullptr || s.tpBatch == nullptr) {
        SetError("ggml_threadpool_new failed");
        return;
      }
      llama_attach_threadpool(s.ctx, s.tp, s.tpBatch);
    }
    s.nBatch = llama_n_batch(s.ctx);
    s.batch = llama_batch_init(static_cast<int32_t>(s.nBatch), 0, 1);
    s.batchAllocated = true;
    s.rowSamplers.resize(llama_n_seq_max(s.ctx));
    s.samplers.assign(llama_n_seq_max(s.ctx), nullptr);
    s.grammars.assign(llama_n_seq_max(s.ctx), nullptr);
    s.logprobCounts.assign(llama_n_seq_max(s.ctx), -1);
    s.nSeqMax = llama_n_seq_max(s.ctx);
  }
  void OnOK() override {
    Napi::Env env = Env();
    auto* data = env.GetInstanceData<AddonData>();
    auto* holder = new std::shared_ptr<ContextState>(st_);
    auto ext = Napi::External<std::shared_ptr<ContextState>>::New(
        env, holder, [](Napi::Env, std::shared_ptr<ContextState>* p) { delete p; });
    deferred_.Resolve(data->contextCtor.New({ext}));
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(codedError(Env(), "LLAMA_CONTEXT_CREATE_FAILED", e.Message()).Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  llama_context_params params_;
  uint32_t poll_;
  std::shared_ptr<ContextState> st_;
};

// createContext(model, opts) -> Promise<LlamaContext>
// opts: { nCtx, nSeqMax, nBatch, nUBatch, threads, threadsBatch, flashAttn?: boolean (absent = auto),
//         kvUnified = true, typeK = "f16", typeV = typeK, swaFull = false, threadpoolPoll = 50,
//         computeTiming = false }
Napi::Value CreateContext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "model must be a LlamaModel");
  Napi::Object modelObj = info[0].As<Napi::Object>();
  auto* data = env.GetInstanceData<AddonData>();
  if (!modelObj.InstanceOf(data->modelCtor.Value())) throw Napi::TypeError::New(env, "model must be a LlamaModel");
  Model* model = Model::Unwrap(modelObj);
  model->live(env);
  Napi::Object o = (info.Length() > 1 && info[1].IsObject()) ? info[1].As<Napi::Object>() : Napi::Object::New(env);

  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  llama_context_params p = llama_context_default_params();
  p.n_ctx = static_cast<uint32_t>(optNumber(o, "nCtx", 4096));
  p.n_seq_max = static_cast<uint32_t>(optNumber(o, "nSeqMax", 1));
  p.n_batch = static_cast<uint32_t>(optNumber(o, "nBatch", 512));
  p.n_ubatch = static_cast<uint32_t>(optNumber(o, "nUBatch", std::min<double>(p.n_batch, 512)));
  p.n_threads = static_cast<int32_t>(optNumber(o, "threads", hw));
  p.n_threads_batch = static_cast<int32_t>(optNumber(o, "threadsBatch", p.n_threads));
  Napi::Value fa = o.Get("flashAttn");
  if (fa.IsBoolean()) {
    p.flash_attn_type = fa.As<Napi::Boolean>().Value() ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  } else {
    p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  }
  p.kv_unified = optBool(o, "kvUnified", true);
  p.type_k = parseKvType(env, optString(o, "typeK", "f16"));
  p.type_v = parseKvType(env, optString(o, "typeV", optString(o, "typeK", "f16")));
  p.swa_full = optBool(o, "swaFull", false);
  p.no_perf = true;
  p.embeddings = false;
  if (optBool(o, "computeTiming", false)) p.cb_eval = computeTimingCallback;
  const double poll = optNumber(o, "threadpoolPoll", 50);

  const size_t maxSeq = llama_max_parallel_sequences();
  if (p.n_seq_max < 1 || p.n_seq_max > maxSeq) {
    throw Napi::RangeError::New(env, "nSeqMax must be in [1, " + std::to_string(maxSeq) + "]");
  }
  if (p.n_ctx < 1 || p.n_batch < 1 || p.n_ubatch < 1 || p.n_ubatch > p.n_batch) {
    throw Napi::RangeError::New(env, "need nCtx >= 1 and 1 <= nUBatch <= nBatch");
  }
  if (p.n_threads < 1 || p.n_threads_batch < 1 || p.n_threads > GGML_MAX_N_THREADS ||
      p.n_threads_batch > GGML_MAX_N_THREADS) {
    throw Napi::RangeError::New(env, "threads and threadsBatch must be >= 1");
  }
  if (poll < 0 || poll > 100) throw Napi::RangeError::New(env, "threadpoolPoll must be in [0, 100]");

  auto* worker = new CreateContextWorker(env, model->handle(), p, static_cast<uint32_t>(poll));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// ---------------------------------------------------------------------------------------------------------
// Context basics

Napi::Function DefineContext(Napi::Env env) { return Context::Define(env); }

Napi::Function Context::Define(Napi::Env env) {
  return DefineClass(env, "LlamaContext",
                     {
                         InstanceMethod<&Context::Info>("info"),
                         InstanceMethod<&Context::SetSampler>("setSampler"),
                         InstanceMethod<&Context::ResetSampler>("resetSampler"),
                         InstanceMethod<&Context::AcceptToken>("acceptToken"),
                         InstanceMethod<&Context::Decode>("decode"),
                         InstanceMethod<&Context::DecodeSync>("decodeSync"),
                         InstanceMethod<&Context::MemClear>("memClear"),
                         InstanceMethod<&Context::MemSeqRm>("memSeqRm"),
                         InstanceMethod<&Context::MemSeqCp>("memSeqCp"),
                         InstanceMethod<&Context::MemSeqKeep>("memSeqKeep"),
                         InstanceMethod<&Context::MemSeqAdd>("memSeqAdd"),
                         InstanceMethod<&Context::MemSeqPosMin>("memSeqPosMin"),
                         InstanceMethod<&Context::MemSeqPosMax>("memSeqPosMax"),
                         InstanceMethod<&Context::MemCanShift>("memCanShift"),
                         InstanceMethod<&Context::StateSeqSize>("stateSeqSize"),
                         InstanceMethod<&Context::StateSeqSave>("stateSeqSave"),
                         InstanceMethod<&Context::StateSeqSaveInto>("stateSeqSaveInto"),
                         InstanceMethod<&Context::StateSeqLoad>("stateSeqLoad"),
                         InstanceMethod<&Context::StateSeqSaveFile>("stateSeqSaveFile"),
                         InstanceMethod<&Context::StateSeqLoadFile>("stateSeqLoadFile"),
                         InstanceMethod<&Context::Free>("free"),
                     });
}

Context::Context(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Context>(info) {
  if (info.Length() != 1 || !info[0].IsExternal()) {
    throw Napi::TypeError::New(info.Env(), "LlamaContext cannot be constructed directly: use createContext()");
  }
  // Take ownership: the External is only a courier and must not keep the context alive until GC.
  st_ = std::move(*info[0].As<Napi::External<std::shared_ptr<ContextState>>>().Data());
}

ContextState& Context::idle(Napi::Env env) {
  if (!st_) throwCoded(env, "LLAMA_CONTEXT_FREED", "context was freed");
  if (busy) throwCoded(env, "LLAMA_CONTEXT_BUSY", "context is busy: an async operation on it has not settled");
  return *st_;
}

int32_t Context::seqArg(const Napi::CallbackInfo& info, size_t i, bool allowAny) {
  const int32_t seq = argInt(info, i, "seqId");
  const int32_t lo = allowAny ? -1 : 0;
  if (seq < lo || seq >= static_cast<int32_t>(st_->nSeqMax)) {
    throw Napi::RangeError::New(info.Env(), "seqId " + std::to_string(seq) + " out of range [" + std::to_string(lo) +
                                                ", " + std::to_string(st_->nSeqMax) + ")");
  }
  return seq;
}

Napi::Value Context::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!st_) throwCoded(env, "LLAMA_CONTEXT_FREED", "context was freed");
  ContextState& s = *st_;
  Napi::Object o = Napi::Object::New(env);
  o.Set("nCtx", Napi::Number::New(env, llama_n_ctx(s.ctx)));
  o.Set("nCtxSeq", Napi::Number::New(env, llama_n_ctx_seq(s.ctx)));
  o.Set("nBatch", Napi::Number::New(env, llama_n_batch(s.ctx)));
  o.Set("nUBatch", Napi::Number::New(env, llama_n_ubatch(s.ctx)));
  o.Set("nSeqMax", Napi::Number::New(env, llama_n_seq_max(s.ctx)));
  o.Set("threads", Napi::Number::New(env, s.threads));
  o.Set("threadsBatch", Napi::Number::New(env, s.threadsBatch));
  o.Set("threadpool", Napi::Boolean::New(env, s.tp != nullptr));
  o.Set("flashAttn", s.flashAttn < 0 ? Napi::Value(Napi::String::New(env, "auto"))
                                     : Napi::Value(Napi::Boolean::New(env, s.flashAttn == 1)));
  o.Set("kvUnified", Napi::Boolean::New(env, s.kvUnified));
  o.Set("typeK", kvTypeName(s.typeK));
  o.Set("typeV", kvTypeName(s.typeV));
  const int64_t kvb = kvBytesPerToken(s.model->model, s.typeK, s.typeV);
  o.Set("kvBytesPerToken", kvb >= 0 ? Napi::Value(Napi::Number::New(env, static_cast<double>(kvb))) : env.Null());
  return o;
}

// ---------------------------------------------------------------------------------------------------------
// samplers

// setSampler(seqId, params | null)
// params: { temperature = 0 (greedy), topK = 0, topP = 1, minP = 0, seed = LLAMA_DEFAULT_SEED,
//           grammar?: GBNF string, grammarRoot = "root", logitBias?: [{ token, bias }],
//           presencePenalty = 0, frequencyPenalty = 0, repetitionPenalty = 1,
//           promptTokens?: Int32Array (what the repetition penalty counts besides the sequence's output) }
Napi::Value Context::SetSampler(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ContextState& s = idle(env);
  const int32_t seq = seqArg(info, 0);
  llama_sampler* chain = nullptr;
  llama_sampler* grammarStage = nullptr;
  std::unique_ptr<RowSampler> own;
  int32_t logprobs = -1;
  if (info.Length() > 1 && info[1].IsObject()) {
    Napi::Object o = info[1].As<Napi::Object>();
    const SamplingParams params = parseSamplingParams(env, o);
    logprobs = parseLogprobCount(env, o);
    const std::string grammar = optString(o, "grammar", "");
    const std::string root = optString(o, "grammarRoot", "root");
    const int32_t nVocab = llama_vocab_n_tokens(s.model->vocab);
    std::vector<LogitBias> biases = parseLogitBias(env, o, nVocab);

    // plain greedy needs no sampler: the decode takes the argmax itself. Otherwise ours samples the row in
    // place, biases and penalties included. A grammar is llama.cpp's, in a chain (the grammar, then the
    // rest); ours asks it about single tokens where that gives the constrained distribution, else the chain
    // samples ours' adjusted row (sampleUnder).
    const bool plainGreedy = params.temperature <= 0 && biases.empty() && grammar.empty() && !params.penalized();
    if (!plainGreedy) {
      own = std::make_unique<RowSampler>(params, std::move(biases), tokenList(env, o, "promptTokens", nVocab));
    }
    if (!grammar.empty()) {
      llama_sampler_chain_params cp = llama_sampler_chain_default_params();
      cp.no_perf = true;
      chain = llama_sampler_chain_init(cp);
      llama_sampler* g = llama_sampler_init_grammar(s.model->vocab, grammar.c_str(), root.c_str());
      if (g == nullptr) {
        llama_sampler_free(chain);
        throwCoded(env, "LLAMA_GRAMMAR_INVALID", "grammar failed to parse (see log for the parser's message)");
      }
      llama_sampler_chain_add(chain, g);
      grammarStage = g;
      appendSamplingStages(chain, params);
    }
  }
  if (s.samplers[seq] != nullptr) llama_sampler_free(s.samplers[seq]);
  s.samplers[seq] = chain;
  s.grammars[seq] = grammarStage;
  s.rowSamplers[seq] = std::move(own);
  s.logprobCounts[seq] = logprobs;
  return env.Undefined();
}

// resetSampler(seqId): back to the grammar's start and the seed's RNG state.
Napi::Value Context::ResetSampler(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  const int32_t seq = seqArg(info, 0);
  if (s.samplers[seq] != nullptr) llama_sampler_reset(s.samplers[seq]);
  if (s.rowSamplers[seq] != nullptr) s.rowSamplers[seq]->reset();
  return info.Env().Undefined();
}

// Whether the grammar allows `token` next: apply() on that one candidate masks it or not, and does not
// advance the grammar. A grammar that throws allows nothing.
static bool grammarAllows(llama_sampler* grammar, llama_token token) {
  llama_token_data one{token, 0.0f, 0.0f};
  llama_token_data_array arr{&one, 1, -1, false};
  try {
    llama_sampler_apply(grammar, &arr);
  } catch (const std::exception&) {
    return false;
  }
  return std::isfinite(one.logit);
}

// acceptToken(seqId, token): advance the slot's sampler state (e.g. grammar) by a token chosen elsewhere.
Napi::Value Context::AcceptToken(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ContextState& s = idle(env);
  const int32_t seq = seqArg(info, 0);
  const int32_t token = argInt(info, 1, "token");
  if (token < 0 || token >= llama_vocab_n_tokens(s.model->vocab)) throw Napi::RangeError::New(env, "token out of range");
  // llama.cpp aborts the process when a grammar accepts a token it does not allow (e.g. EOG before the
  // grammar is complete), so ask the grammar stage first
  if (s.grammars[seq] != nullptr && !grammarAllows(s.grammars[seq], token)) {
    throwCoded(env, "LLAMA_SAMPLER_REJECTED", "token " + std::to_string(token) + " is not allowed by the grammar here");
  }
  if (s.samplers[seq] != nullptr) {
    try {
      llama_sampler_accept(s.samplers[seq], token);
    } catch (const std::exception& e) {
      throwCoded(env, "LLAMA_SAMPLER_REJECTED", e.what());
    }
  }
  if (s.rowSamplers[seq] != nullptr) s.rowSamplers[seq]->accept(token);
  return env.Undefined();
}

// One row's token, accepted by the sequence's samplers (-1 with `error` set when nothing is allowed).
static llama_token sampleRow(ContextState& s, int32_t seq, const float* row, int32_t nVocab, SamplingScratch& scratch,
                             std::vector<llama_token_data>& cands, std::string& error) {
  RowSampler* own = s.rowSamplers[seq].get();
  if (own == nullptr) return argmaxRow(row, nVocab);
  llama_sampler* chain = s.samplers[seq];
  if (chain == nullptr) {
    const llama_token token = own->sample(row, nVocab, scratch);
    own->accept(token);
    return token;
  }
  llama_sampler* grammar = s.grammars[seq];
  const llama_token token = sampleUnder(
      *own, chain, [grammar](int32_t t) { return grammarAllows(grammar, t); }, row, nVocab, scratch, cands, error);
  if (token < 0) return -1;
  try {
    llama_sampler_accept(chain, token);
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
  own->accept(token);
  return token;
}

// ---------------------------------------------------------------------------------------------------------
// decode

class DecodeWorker : public ContextWorker {
 public:
  DecodeWorker(Context* owner, const Napi::Object& self) : ContextWorker(owner, self) {}

  std::vector<llama_token> tokens;
  std::vector<llama_pos> pos;
  std::vector<llama_seq_id> seq;
  std::vector<int8_t> want;
  // a scored row (a prompt's, for its prompt logprobs): the token that follows it, whose logprob and topN most
  // likely alternatives are computed instead of sampling the row (-1: an ordinary row)
  std::vector<llama_token> scoreTarget;
  std::vector<int32_t> scoreTop;
  bool sample = true;
  bool returnLogits = false;

  // The same work on the calling (JS) thread, never queued: no worker hop, no Promise. For steps whose
  // compute is a few milliseconds, where the hop is a tenth of the step.
  Napi::Value RunHere(Napi::Env env) {
    Execute();
    owner_->busy = false;
    if (failed_) throw FailureError(env, message_);
    return Result(env);
  }

  void Execute() override {
    ContextState& s = *st_;
    const int32_t n = static_cast<int32_t>(tokens.size());
    llama_batch& b = s.batch;
    b.n_tokens = n;
    for (int32_t i = 0; i < n; i++) {
      b.token[i] = tokens[i];
      b.pos[i] = pos[i];
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = seq[i];
      b.logits[i] = want[i];
    }
    const int64_t t0 = nowUs();
    s.phaseMarkUs = t0;
    s.inUbatch = false;
    s.prepareUs = 0;
    s.inputsUs = 0;
    s.computeUs = 0;
    s.computeSpans = 0;
    int32_t rc = 0;
    try {
      rc = llama_decode(s.ctx, b);
      // llama_decode may return while a GPU still computes; the step is not over until the outputs are ready
      if (rc == 0) llama_synchronize(s.ctx);
    } catch (const std::exception& e) {
      Fail("LLAMA_DECODE_FAILED", e.what());
      return;
    }
    const int64_t t1 = nowUs();
    decodeUs_ = t1 - t0;
    if (s.computeTiming && s.computeSpans > 0) {
      computeUs_ = s.computeUs;
      prepareUs_ = s.prepareUs;
      inputsUs_ = s.inputsUs;
      finishUs_ = t1 - s.phaseMarkUs;
    }
    if (rc != 0) {
      const char* code = rc == 1    ? "LLAMA_DECODE_NO_KV_SLOT"
                         : rc == 2  ? "LLAMA_DECODE_ABORTED"
                         : rc == -1 ? "LLAMA_DECODE_INVALID_BATCH"
                                    : "LLAMA_DECODE_FAILED";
      Fail(code, "llama_decode returned " + std::to_string(rc), rc);
      return;
    }
    const int32_t nVocab = llama_vocab_n_tokens(s.model->vocab);
    // Logits pointers first, on this thread: llama_get_logits_ith may reorder llama.cpp's outputs.
    std::vector<const float*> rowLogits;
    for (int32_t i = 0; i < n; i++) {
      if (want[i] == 0) continue;
      const float* l = llama_get_logits_ith(s.ctx, i);
      if (l == nullptr) {
        Fail("LLAMA_DECODE_FAILED", "no logits for batch index " + std::to_string(i));
        return;
      }
      outIndex_.push_back(i);
      outSeq_.push_back(seq[i]);
      rowLogits.push_back(l);
      if (returnLogits) logits_.insert(logits_.end(), l, l + nVocab);
    }
    if (sample && !sampleRows(s, rowLogits, nVocab)) return;
    sampleUs_ = nowUs() - t1;
    nVocab_ = nVocab;
  }

 protected:
  // Samples every output row. Rows of different sequences have independent samplers, so they are sampled
  // on up to `threads` threads (at a real vocabulary even ours takes 0.1 ms a row, llama.cpp's chain with a
  // grammar a millisecond or more); rows of one sequence stay on one thread, in order.
  bool sampleRows(ContextState& s, const std::vector<const float*>& rowLogits, int32_t nVocab) {
    const size_t m = rowLogits.size();
    outToken_.assign(m, -1);
    outEog_.assign(m, 0);
    outScored_.assign(m, 0);
    outRank_.assign(m, 0);
    withLogprobs_ = false;
    topStride_ = 0;
    // the top entries a row reports: a scored row's own count, else its sequence's (-1: none)
    auto topOf = [&](size_t r) { return scored(r) ? scoreTop[outIndex_[r]] : s.logprobCounts[outSeq_[r]]; };
    for (size_t r = 0; r < m; r++) {
      withLogprobs_ = withLogprobs_ || topOf(r) >= 0;
      topStride_ = std::max(topStride_, topOf(r));
    }
    if (withLogprobs_) {
      outLogprob_.assign(m, NAN);
      outTopCount_.assign(m, 0);
      outTopToken_.assign(m * static_cast<size_t>(topStride_), -1);
      outTopLogprob_.assign(m * static_cast<size_t>(topStride_), NAN);
    }
    // one task per sequence with a sampler (its rows in order, its sampler's state), one per greedy row
    std::vector<std::vector<size_t>> tasks;
    std::vector<std::pair<int32_t, size_t>> taskOfSeq;
    // a thread for every kMinCandidatesPerThread candidates a row's sampler goes through: llama.cpp's chain
    // (a grammar's) builds and passes over all of them several times, ours reads the row about three times
    // in vector lanes, an argmax once
    constexpr size_t kMinCandidatesPerThread = 65536;
    size_t candidates = 0;
    for (size_t r = 0; r < m; r++) {
      const int32_t seq = outSeq_[r];
      if (scored(r)) {  // no sampler state: a task of its own
        candidates += static_cast<size_t>(nVocab) / 4;
        tasks.push_back({r});
        continue;
      }
      const bool sampled = s.rowSamplers[seq] != nullptr;  // a grammar's chain comes only with ours
      candidates += static_cast<size_t>(nVocab) / (s.samplers[seq] != nullptr ? 1 : sampled ? 4 : 16);
      if (s.logprobCounts[seq] >= 0) candidates += static_cast<size_t>(nVocab) / 4;
      if (!sampled) {
        tasks.push_back({r});
        continue;
      }
      auto it = std::find_if(taskOfSeq.begin(), taskOfSeq.end(), [&](const auto& e) { return e.first == seq; });
      if (it == taskOfSeq.end()) {
        taskOfSeq.emplace_back(seq, tasks.size());
        tasks.push_back({r});
      } else {
        tasks[it->second].push_back(r);
      }
    }
    const size_t byWork = std::max<size_t>(1, candidates / kMinCandidatesPerThread);
    const size_t nThreads = std::min({tasks.size(), byWork, static_cast<size_t>(std::max(1, s.threads))});
    std::vector<std::string> errors(m);
    auto work = [&](size_t first) {
      std::vector<llama_token_data> cands;
      SamplingScratch scratch;
      for (size_t t = first; t < tasks.size(); t += nThreads) {
        for (size_t r : tasks[t]) {
          const bool score = scored(r);
          const llama_token token = score ? scoreTarget[outIndex_[r]]
                                          : sampleRow(s, outSeq_[r], rowLogits[r], nVocab, scratch, cands, errors[r]);
          if (token < 0) break;  // a sampler that failed stops its sequence's later rows
          outToken_[r] = token;
          outScored_[r] = score ? 1 : 0;
          outEog_[r] = !score && llama_vocab_is_eog(s.model->vocab, token) ? 1 : 0;
          const int32_t top = topOf(r);
          if (top >= 0) {
            const size_t at = r * static_cast<size_t>(topStride_);
            outTopCount_[r] = static_cast<uint8_t>(rowLogprobs(rowLogits[r], nVocab, token, top, scratch,
                                                               &outLogprob_[r], &outTopToken_[at],
                                                               &outTopLogprob_[at]));
            if (score) outRank_[r] = tokenRank(rowLogits[r], nVocab, token, scratch);
          }
        }
      }
    };
    if (nThreads <= 1) {
      work(0);
    } else {
      std::vector<std::thread> pool;
      size_t k = 1;
      try {
        for (; k < nThreads; k++) pool.emplace_back(work, k);
      } catch (const std::system_error&) {
        // no more threads to be had: this one samples the rest
      }
      for (size_t rest = k; rest < nThreads; rest++) work(rest);
      work(0);
      for (std::thread& th : pool) th.join();
    }
    for (size_t r = 0; r < m; r++) {
      if (!errors[r].empty()) {
        Fail("LLAMA_SAMPLE_FAILED", errors[r]);
        return false;
      }
    }
    return true;
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    const size_t m = outIndex_.size();
    Napi::Int32Array idx = Napi::Int32Array::New(env, m);
    Napi::Int32Array sq = Napi::Int32Array::New(env, m);
    if (m > 0) {
      std::memcpy(idx.Data(), outIndex_.data(), m * sizeof(int32_t));
      std::memcpy(sq.Data(), outSeq_.data(), m * sizeof(int32_t));
    }
    o.Set("batchIndex", idx);
    o.Set("seqId", sq);
    if (sample) {
      Napi::Int32Array tok = Napi::Int32Array::New(env, m);
      Napi::Uint8Array eog = Napi::Uint8Array::New(env, m);
      if (m > 0) {
        std::memcpy(tok.Data(), outToken_.data(), m * sizeof(int32_t));
        std::memcpy(eog.Data(), outEog_.data(), m);
      }
      o.Set("token", tok);
      o.Set("isEog", eog);
      if (!scoreTarget.empty()) {
        Napi::Uint8Array scoredRows = Napi::Uint8Array::New(env, m);
        Napi::Int32Array ranks = Napi::Int32Array::New(env, m);
        if (m > 0) {
          std::memcpy(scoredRows.Data(), outScored_.data(), m);
          std::memcpy(ranks.Data(), outRank_.data(), m * sizeof(int32_t));
        }
        o.Set("scored", scoredRows);
        o.Set("rank", ranks);
      }
      if (withLogprobs_) setLogprobs(env, o, m);
    }
    if (returnLogits) {
      Napi::Float32Array l = Napi::Float32Array::New(env, logits_.size());
      if (!logits_.empty()) std::memcpy(l.Data(), logits_.data(), logits_.size() * sizeof(float));
      o.Set("logits", l);
    }
    o.Set("nVocab", Napi::Number::New(env, nVocab_));
    o.Set("decodeUs", Napi::Number::New(env, static_cast<double>(decodeUs_)));
    o.Set("sampleUs", Napi::Number::New(env, static_cast<double>(sampleUs_)));
    if (computeUs_ >= 0) {
      o.Set("computeUs", Napi::Number::New(env, static_cast<double>(computeUs_)));
      o.Set("prepareUs", Napi::Number::New(env, static_cast<double>(prepareUs_)));
      o.Set("inputsUs", Napi::Number::New(env, static_cast<double>(inputsUs_)));
      o.Set("finishUs", Napi::Number::New(env, static_cast<double>(finishUs_)));
    }
    return o;
  }

 private:
  std::vector<int32_t> outIndex_;
  std::vector<int32_t> outSeq_;
  std::vector<int32_t> outToken_;
  std::vector<uint8_t> outEog_;
  std::vector<uint8_t> outScored_;
  std::vector<int32_t> outRank_;  // a scored row's target's rank (1: the most likely)
  bool scored(size_t r) const { return !scoreTarget.empty() && scoreTarget[outIndex_[r]] >= 0; }
  // when a row's sequence asked for logprobs: each row's token logprob (NaN for rows that did not ask) and its
  // top entries, topStride_ slots a row (the most any row asked for)
  bool withLogprobs_ = false;
  int32_t topStride_ = 0;
  std::vector<float> outLogprob_;
  std::vector<uint8_t> outTopCount_;
  std::vector<int32_t> outTopToken_;
  std::vector<float> outTopLogprob_;

  // logprob and topCount (one a row), topToken and topLogprob (topStride a row)
  void setLogprobs(Napi::Env env, Napi::Object& o, size_t m) const {
    Napi::Float32Array lp = Napi::Float32Array::New(env, m);
    Napi::Uint8Array count = Napi::Uint8Array::New(env, m);
    Napi::Int32Array topToken = Napi::Int32Array::New(env, outTopToken_.size());
    Napi::Float32Array topLogprob = Napi::Float32Array::New(env, outTopLogprob_.size());
    if (m > 0) {
      std::memcpy(lp.Data(), outLogprob_.data(), m * sizeof(float));
      std::memcpy(count.Data(), outTopCount_.data(), m);
      std::memcpy(topToken.Data(), outTopToken_.data(), outTopToken_.size() * sizeof(int32_t));
      std::memcpy(topLogprob.Data(), outTopLogprob_.data(), outTopLogprob_.size() * sizeof(float));
    }
    o.Set("logprob", lp);
    o.Set("topCount", count);
    o.Set("topToken", topToken);
    o.Set("topLogprob", topLogprob);
    o.Set("topStride", Napi::Number::New(env, topStride_));
  }
  std::vector<float> logits_;
  int32_t nVocab_ = 0;
  int64_t decodeUs_ = 0;
  int64_t sampleUs_ = 0;
  int64_t computeUs_ = -1;
  int64_t prepareUs_ = 0;
  int64_t inputsUs_ = 0;
  int64_t finishUs_ = 0;
};

template <typename T>
static T typedArg(const Napi::CallbackInfo& info, size_t i, napi_typedarray_type type, const char* name) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != type) {
    throw Napi::TypeError::New(info.Env(), std::string(name) + " has the wrong typed array type");
  }
  return info[i].As<T>();
}

// decode(tokens: Int32Array, pos: Int32Array, seqIds: Int32Array, wantLogits: Uint8Array,
//        opts?: { sample = true, returnLogits = false, scoreTargets?: Int32Array, scoreTop?: Int32Array })
//   A row with scoreTargets[i] >= 0 is scored instead of sampled: `token` is its target, with the target's
//   logprob and its scoreTop[i] most likely alternatives (a prompt's logprobs); `scored` marks such rows and
//   `rank` gives each one's target's rank (1: the most likely).
//   -> Promise<{ batchIndex, seqId, token?, isEog?, logits?, nVocab, decodeUs, sampleUs }>, with, when a sampled
//      row's sequence asked for logprobs, { logprob, topCount, topToken, topLogprob, topStride } (setLogprobs)
DecodeWorker* Context::PrepareDecode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ContextState& s = idle(env);
  auto tokens = typedArg<Napi::Int32Array>(info, 0, napi_int32_array, "tokens");
  auto pos = typedArg<Napi::Int32Array>(info, 1, napi_int32_array, "pos");
  auto seqs = typedArg<Napi::Int32Array>(info, 2, napi_int32_array, "seqIds");
  auto want = typedArg<Napi::Uint8Array>(info, 3, napi_uint8_array, "wantLogits");
  const size_t n = tokens.ElementLength();
  if (n == 0) throw Napi::RangeError::New(env, "empty batch");
  if (pos.ElementLength() != n || seqs.ElementLength() != n || want.ElementLength() != n) {
    throw Napi::RangeError::New(env, "tokens, pos, seqIds and wantLogits must have the same length");
  }
  if (n > s.nBatch) {
    throw Napi::RangeError::New(env, "batch of " + std::to_string(n) + " tokens exceeds nBatch " + std::to_string(s.nBatch));
  }
  const int32_t nVocab = llama_vocab_n_tokens(s.model->vocab);
  auto* w = new DecodeWorker(this, Value());
  try {
    if (info.Length() > 4 && info[4].IsObject()) {
      Napi::Object o = info[4].As<Napi::Object>();
      w->sample = optBool(o, "sample", true);
      w->returnLogits = optBool(o, "returnLogits", false);
      if (o.Has("scoreTargets") && !o.Get("scoreTargets").IsUndefined()) {
        Napi::Value targets = o.Get("scoreTargets");
        Napi::Value tops = o.Get("scoreTop");
        if (!targets.IsTypedArray() || targets.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array ||
            !tops.IsTypedArray() || tops.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
          throw Napi::TypeError::New(env, "scoreTargets and scoreTop must be Int32Arrays");
        }
        auto t = targets.As<Napi::Int32Array>();
        auto k = tops.As<Napi::Int32Array>();
        if (t.ElementLength() != n || k.ElementLength() != n) {
          throw Napi::RangeError::New(env, "scoreTargets and scoreTop must have the batch's length");
        }
        w->scoreTarget.assign(t.Data(), t.Data() + n);
        w->scoreTop.assign(k.Data(), k.Data() + n);
      }
    }
    w->tokens.assign(tokens.Data(), tokens.Data() + n);
    w->pos.assign(pos.Data(), pos.Data() + n);
    w->seq.assign(seqs.Data(), seqs.Data() + n);
    w->want.resize(n);
    for (size_t i = 0; i < n; i++) {
      if (w->tokens[i] < 0 || w->tokens[i] >= nVocab) {
        throw Napi::RangeError::New(env, "token " + std::to_string(w->tokens[i]) + " out of range at " + std::to_string(i));
      }
      if (w->seq[i] < 0 || w->seq[i] >= static_cast<int32_t>(s.nSeqMax)) {
        throw Napi::RangeError::New(env, "seqId " + std::to_string(w->seq[i]) + " out of range at " + std::to_string(i));
      }
      if (w->pos[i] < 0) throw Napi::RangeError::New(env, "negative position at " + std::to_string(i));
      w->want[i] = want[i] != 0 ? 1 : 0;
      if (!w->scoreTarget.empty() && w->scoreTarget[i] >= 0) {
        if (w->scoreTarget[i] >= nVocab) {
          throw Napi::RangeError::New(env, "score target " + std::to_string(w->scoreTarget[i]) + " out of range at " + std::to_string(i));
        }
        if (w->scoreTop[i] < 0 || w->scoreTop[i] > kMaxTopLogprobs) {
          throw Napi::RangeError::New(env, "scoreTop must be 0 to " + std::to_string(kMaxTopLogprobs));
        }
        w->want[i] = 1;  // a scored row needs its logits
      }
    }
  } catch (...) {
    busy = false;
    delete w;
    throw;
  }
  return w;
}

Napi::Value Context::Decode(const Napi::CallbackInfo& info) {
  DecodeWorker* w = PrepareDecode(info);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// decodeSync(...same arguments as decode) -> the same result, computed on the calling thread.
Napi::Value Context::DecodeSync(const Napi::CallbackInfo& info) {
  std::unique_ptr<DecodeWorker> w(PrepareDecode(info));
  return w->RunHere(info.Env());
}

// ---------------------------------------------------------------------------------------------------------
// memory (KV) ops: metadata-only and fast, so synchronous; refused while an async op is in flight.

Napi::Value Context::MemClear(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  const bool data = info.Length() < 1 || info[0].ToBoolean().Value();
  llama_memory_clear(llama_get_memory(s.ctx), data);
  return info.Env().Undefined();
}

static llama_pos posArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || info[i].IsUndefined() || info[i].IsNull()) return -1;
  return argInt(info, i, "position");
}

// memSeqRm(seqId (-1 = any), p0 = -1, p1 = -1) -> boolean: removes positions [p0, p1)
Napi::Value Context::MemSeqRm(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  const int32_t seq = seqArg(info, 0, true);
  const bool ok = llama_memory_seq_rm(llama_get_memory(s.ctx), seq, posArg(info, 1), posArg(info, 2));
  return Napi::Boolean::New(info.Env(), ok);
}

// memSeqCp(src, dst, p0 = -1, p1 = -1): dst shares src's cells in the unified pool (no data copy).
Napi::Value Context::MemSeqCp(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  const int32_t src = seqArg(info, 0);
  const int32_t dst = seqArg(info, 1);
  llama_memory_seq_cp(llama_get_memory(s.ctx), src, dst, posArg(info, 2), posArg(info, 3));
  return info.Env().Undefined();
}

Napi::Value Context::MemSeqKeep(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  llama_memory_seq_keep(llama_get_memory(s.ctx), seqArg(info, 0));
  return info.Env().Undefined();
}

// memSeqAdd(seqId, p0, p1, delta): shift positions (only when memCanShift()).
Napi::Value Context::MemSeqAdd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ContextState& s = idle(env);
  llama_memory_t mem = llama_get_memory(s.ctx);
  if (!llama_memory_can_shift(mem)) throwCoded(env, "LLAMA_CANNOT_SHIFT", "this memory does not support shifting");
  llama_memory_seq_add(mem, seqArg(info, 0), posArg(info, 1), posArg(info, 2), argInt(info, 3, "delta"));
  return env.Undefined();
}

Napi::Value Context::MemSeqPosMin(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  return Napi::Number::New(info.Env(), llama_memory_seq_pos_min(llama_get_memory(s.ctx), seqArg(info, 0)));
}

Napi::Value Context::MemSeqPosMax(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  return Napi::Number::New(info.Env(), llama_memory_seq_pos_max(llama_get_memory(s.ctx), seqArg(info, 0)));
}

Napi::Value Context::MemCanShift(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  return Napi::Boolean::New(info.Env(), llama_memory_can_shift(llama_get_memory(s.ctx)));
}

// ---------------------------------------------------------------------------------------------------------
// per-sequence state: the RAM (Buffer) and disk (file) offload tiers

Napi::Value Context::StateSeqSize(const Napi::CallbackInfo& info) {
  ContextState& s = idle(info.Env());
  const size_t n = llama_state_seq_get_size(s.ctx, seqArg(info, 0));
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

class SeqSaveWorker : public ContextWorker {
 public:
  SeqSaveWorker(Context* owner, const Napi::Object& self, int32_t seq) : ContextWorker(owner, self), seq_(seq) {}
  void Execute() override {
    ContextState& s = *st_;
    try {
      const size_t size = llama_state_seq_get_size(s.ctx, seq_);
      data_ = new std::vector<uint8_t>(size);
      const size_t got = llama_state_seq_get_data(s.ctx, data_->data(), size, seq_);
      if (got != size) {
        Fail("LLAMA_STATE_SAVE_FAILED", "llama_state_seq_get_data wrote " + std::to_string(got) + " of " +
                                            std::to_string(size) + " bytes");
      }
    } catch (const std::exception& e) {
      Fail("LLAMA_STATE_SAVE_FAILED", e.what());
    }
  }
  ~SeqSaveWorker() override { delete data_; }

 protected:
  Napi::Value Result(Napi::Env env) override {
    std::vector<uint8_t>* v = data_;
    data_ = nullptr;
    if (v->empty()) {
      delete v;
      return Napi::Buffer<uint8_t>::New(env, 0);
    }
    return Napi::Buffer<uint8_t>::New(env, v->data(), v->size(),
                                      [](Napi::Env, uint8_t*, std::vector<uint8_t>* hint) { delete hint; }, v);
  }

 private:
  int32_t seq_;
  std::vector<uint8_t>* data_ = nullptr;
};

// stateSeqSave(seqId) -> Promise<Buffer>
Napi::Value Context::StateSeqSave(const Napi::CallbackInfo& info) {
  idle(info.Env());
  const int32_t seq = seqArg(info, 0);
  auto* w = new SeqSaveWorker(this, Value(), seq);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// A worker on one sequence and a caller's Buffer (kept alive until it settles); resolves to the bytes moved.
class SeqBufferWorker : public ContextWorker {
 public:
  SeqBufferWorker(Context* owner, const Napi::Object& self, int32_t seq, Napi::Buffer<uint8_t> buf)
      : ContextWorker(owner, self), seq_(seq), data_(buf.Data()), size_(buf.Length()) {
    bufRef_ = Napi::Persistent(buf.As<Napi::Object>());
  }

 protected:
  Napi::Value Result(Napi::Env env) override { return Napi::Number::New(env, static_cast<double>(bytes_)); }

  int32_t seq_;
  uint8_t* data_;
  size_t size_;
  size_t bytes_ = 0;

 private:
  Napi::ObjectReference bufRef_;
};

// Queues a SeqBufferWorker for (seqId, buffer) arguments.
template <typename W>
Napi::Value queueSeqBufferWorker(Context* self, const Napi::CallbackInfo& info, int32_t seq) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[1].IsBuffer()) throw Napi::TypeError::New(env, "state must be a Buffer");
  auto* w = new W(self, self->Value(), seq, info[1].As<Napi::Buffer<uint8_t>>());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// Writes into a caller's Buffer: a reused buffer spares the page faults of fresh memory and, unlike a new
// Buffer per save, adds nothing to V8's external memory (whose growth forces old-space collections).
class SeqSaveIntoWorker : public SeqBufferWorker {
 public:
  using SeqBufferWorker::SeqBufferWorker;
  void Execute() override {
    ContextState& s = *st_;
    try {
      const size_t size = llama_state_seq_get_size(s.ctx, seq_);
      if (size > size_) {
        Fail("LLAMA_STATE_SAVE_FAILED", "state of " + std::to_string(size) + " bytes does not fit a buffer of " +
                                            std::to_string(size_));
        return;
      }
      bytes_ = llama_state_seq_get_data(s.ctx, data_, size, seq_);
      if (bytes_ != size) {
        Fail("LLAMA_STATE_SAVE_FAILED", "llama_state_seq_get_data wrote " + std::to_string(bytes_) + " of " +
                                            std::to_string(size) + " bytes");
      }
    } catch (const std::exception& e) {
      Fail("LLAMA_STATE_SAVE_FAILED", e.what());
    }
  }
};

// stateSeqSaveInto(seqId, buffer) -> Promise<bytesWritten>
Napi::Value Context::StateSeqSaveInto(const Napi::CallbackInfo& info) {
  idle(info.Env());
  return queueSeqBufferWorker<SeqSaveIntoWorker>(this, info, seqArg(info, 0));
}

class SeqLoadWorker : public SeqBufferWorker {
 public:
  using SeqBufferWorker::SeqBufferWorker;
  void Execute() override {
    try {
      bytes_ = llama_state_seq_set_data(st_->ctx, data_, size_, seq_);
    } catch (const std::exception& e) {
      Fail("LLAMA_STATE_LOAD_FAILED", e.what());
      return;
    }
    if (bytes_ == 0) Fail("LLAMA_STATE_LOAD_FAILED", "llama_state_seq_set_data rejected the state (see log)");
  }
};

// stateSeqLoad(seqId, buffer) -> Promise<bytesRead>: replaces the sequence's cells with the saved ones.
Napi::Value Context::StateSeqLoad(const Napi::CallbackInfo& info) {
  idle(info.Env());
  return queueSeqBufferWorker<SeqLoadWorker>(this, info, seqArg(info, 0));
}

class SeqSaveFileWorker : public ContextWorker {
 public:
  SeqSaveFileWorker(Context* owner, const Napi::Object& self, int32_t seq, std::string path,
                    std::vector<llama_token> tokens)
      : ContextWorker(owner, self), seq_(seq), path_(std::move(path)), tokens_(std::move(tokens)) {}
  void Execute() override {
    try {
      written_ = llama_state_seq_save_file(st_->ctx, path_.c_str(), seq_, tokens_.data(), tokens_.size());
    } catch (const std::exception& e) {
      Fail("LLAMA_STATE_SAVE_FAILED", e.what());
      return;
    }
    if (written_ == 0) Fail("LLAMA_STATE_SAVE_FAILED", "could not write sequence state to " + path_);
  }

 protected:
  Napi::Value Result(Napi::Env env) override { return Napi::Number::New(env, static_cast<double>(written_)); }

 private:
  int32_t seq_;
  std::string path_;
  std::vector<llama_token> tokens_;
  size_t written_ = 0;
};

// stateSeqSaveFile(seqId, path, tokens?: Int32Array) -> Promise<bytesWritten>
Napi::Value Context::StateSeqSaveFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  idle(env);
  const int32_t seq = seqArg(info, 0);
  std::string path = argString(info, 1, "path");
  std::vector<llama_token> tokens;
  if (info.Length() > 2 && !info[2].IsUndefined() && !info[2].IsNull()) {
    auto t = typedArg<Napi::Int32Array>(info, 2, napi_int32_array, "tokens");
    tokens.assign(t.Data(), t.Data() + t.ElementLength());
  }
  auto* w = new SeqSaveFileWorker(this, Value(), seq, std::move(path), std::move(tokens));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

class SeqLoadFileWorker : public ContextWorker {
 public:
  SeqLoadFileWorker(Context* owner, const Napi::Object& self, int32_t seq, std::string path, size_t capacity)
      : ContextWorker(owner, self), seq_(seq), path_(std::move(path)), tokens_(capacity) {}
  void Execute() override {
    size_t count = 0;
    try {
      read_ = llama_state_seq_load_file(st_->ctx, path_.c_str(), seq_, tokens_.data(), tokens_.size(), &count);
    } catch (const std::exception& e) {
      Fail("LLAMA_STATE_LOAD_FAILED", e.what());
      return;
    }
    if (read_ == 0) {
      Fail("LLAMA_STATE_LOAD_FAILED", "could not load sequence state from " + path_ + " (see log)");
      return;
    }
    tokens_.resize(count);
  }

 protected:
  Napi::Value Result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    Napi::Int32Array t = Napi::Int32Array::New(env, tokens_.size());
    if (!tokens_.empty()) std::memcpy(t.Data(), tokens_.data(), tokens_.size() * sizeof(llama_token));
    o.Set("bytes", Napi::Number::New(env, static_cast<double>(read_)));
    o.Set("tokens", t);
    return o;
  }

 private:
  int32_t seq_;
  std::string path_;
  std::vector<llama_token> tokens_;
  size_t read_ = 0;
};

// stateSeqLoadFile(seqId, path, tokenCapacity = nCtx) -> Promise<{ bytes, tokens: Int32Array }>
Napi::Value Context::StateSeqLoadFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ContextState& s = idle(env);
  const int32_t seq = seqArg(info, 0);
  std::string path = argString(info, 1, "path");
  size_t capacity = llama_n_ctx(s.ctx);
  if (info.Length() > 2 && info[2].IsNumber()) capacity = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  auto* w = new SeqLoadFileWorker(this, Value(), seq, std::move(path), capacity);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value Context::Free(const Napi::CallbackInfo& info) {
  if (st_ && busy) throwCoded(info.Env(), "LLAMA_CONTEXT_BUSY", "cannot free a context while an async op runs");
  st_.reset();
  return info.Env().Undefined();
}

}  // namespace continuum
