// Host memory a GPU backend copies at DMA speed: page-locked ("pinned") buffers from the device's host buffer
// type, for saved KV states, and a measurement of host <-> device copy bandwidth, pinned and pageable.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "addon.h"

namespace continuum {

ggml_backend_dev_t firstGpuDevice() {
  for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    const auto type = ggml_backend_dev_type(dev);
    if (type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU) return dev;
  }
  return nullptr;
}

static ggml_backend_buffer_type_t pinnedHostBufferType() {
  ggml_backend_dev_t dev = firstGpuDevice();
  return dev == nullptr ? nullptr : ggml_backend_dev_host_buffer_type(dev);
}

// allocPinnedBuffer(bytes) -> Buffer | null: page-locked memory of the first GPU's backend (cudaMallocHost for
// CUDA); null when no GPU backend offers host buffers. Freed when the Buffer is collected; V8 is told of it.
static Napi::Value AllocPinnedBuffer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "bytes must be a number");
  const double requested = info[0].As<Napi::Number>().DoubleValue();
  if (!(requested >= 1)) throw Napi::RangeError::New(env, "bytes must be at least 1");
  const size_t bytes = static_cast<size_t>(requested);
  ggml_backend_buffer_type_t buft = pinnedHostBufferType();
  if (buft == nullptr) return env.Null();
  ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(buft, bytes);
  if (buffer == nullptr) return env.Null();
  Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<int64_t>(bytes));
  auto* base = static_cast<uint8_t*>(ggml_backend_buffer_get_base(buffer));
  return Napi::Buffer<uint8_t>::New(
      env, base, bytes,
      [bytes](Napi::Env finalizeEnv, uint8_t*, ggml_backend_buffer* owned) {
        ggml_backend_buffer_free(owned);
        Napi::MemoryManagement::AdjustExternalMemory(finalizeEnv, -static_cast<int64_t>(bytes));
      },
      buffer);
}

namespace {

// A device tensor of `bytes` bytes with host memory beside it, for timing copies between them.
struct CopyBench {
  ggml_context* ctx = nullptr;
  ggml_backend_buffer_t device = nullptr;
  ggml_backend_buffer_t pinned = nullptr;
  void* pageable = nullptr;
  ggml_tensor* tensor = nullptr;

  ~CopyBench() {
    if (pinned != nullptr) ggml_backend_buffer_free(pinned);
    if (device != nullptr) ggml_backend_buffer_free(device);
    if (ctx != nullptr) ggml_free(ctx);
    std::free(pageable);
  }
};

struct Direction {
  double h2dBps = 0;
  double d2hBps = 0;
};

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The best of `repeats` whole-buffer copies each way after a warm-up: what the link can do, as copy benchmarks report.
Direction timeCopies(ggml_tensor* tensor, void* host, size_t bytes, int repeats) {
  ggml_backend_tensor_set(tensor, host, 0, bytes);
  ggml_backend_tensor_get(tensor, host, 0, bytes);
  double bestSet = 1e30;
  double bestGet = 1e30;
  for (int r = 0; r < repeats; r++) {
    auto t0 = std::chrono::steady_clock::now();
    ggml_backend_tensor_set(tensor, host, 0, bytes);
    bestSet = std::min(bestSet, secondsSince(t0));
    t0 = std::chrono::steady_clock::now();
    ggml_backend_tensor_get(tensor, host, 0, bytes);
    bestGet = std::min(bestGet, secondsSince(t0));
  }
  return {static_cast<double>(bytes) / bestSet, static_cast<double>(bytes) / bestGet};
}

Napi::Object directionObject(Napi::Env env, const Direction& d) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("hostToDeviceBps", d.h2dBps);
  o.Set("deviceToHostBps", d.d2hBps);
  return o;
}

}  // namespace

// measureHostCopyBandwidth(bytes, repeats) -> { device, bytes, pinned: {hostToDeviceBps, deviceToHostBps},
// pageable: {...} } | null: one buffer of `bytes` copied whole between the first GPU and host memory, page-locked
// and ordinary, best of `repeats` each way. Null without a GPU device (or one without host buffers).
static Napi::Value MeasureHostCopyBandwidth(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const size_t bytes = static_cast<size_t>(argInt(info, 0, "bytes"));
  const int repeats = argInt(info, 1, "repeats");
  if (bytes < 1 || repeats < 1) throw Napi::RangeError::New(env, "bytes and repeats must be positive");
  ggml_backend_dev_t dev = firstGpuDevice();
  ggml_backend_buffer_type_t hostType = pinnedHostBufferType();
  if (dev == nullptr || hostType == nullptr) return env.Null();

  CopyBench bench;
  ggml_init_params params{ggml_tensor_overhead() * 2, nullptr, true};
  bench.ctx = ggml_init(params);
  bench.tensor = ggml_new_tensor_1d(bench.ctx, GGML_TYPE_I8, static_cast<int64_t>(bytes));
  bench.device = ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(dev), bytes);
  bench.pinned = ggml_backend_buft_alloc_buffer(hostType, bytes);
  bench.pageable = std::malloc(bytes);
  if (bench.device == nullptr || bench.pinned == nullptr || bench.pageable == nullptr) {
    throwCoded(env, "LLAMA_ALLOC_FAILED", "could not allocate " + std::to_string(bytes) + " bytes on both sides");
  }
  if (ggml_backend_tensor_alloc(bench.device, bench.tensor, ggml_backend_buffer_get_base(bench.device)) !=
      GGML_STATUS_SUCCESS) {
    throwCoded(env, "LLAMA_ALLOC_FAILED", "could not place the copy tensor in device memory");
  }
  void* pinnedBase = ggml_backend_buffer_get_base(bench.pinned);
  std::memset(pinnedBase, 0x5a, bytes);
  std::memset(bench.pageable, 0x5a, bytes);

  Napi::Object out = Napi::Object::New(env);
  out.Set("device", ggml_backend_dev_description(dev));
  out.Set("bytes", Napi::Number::New(env, static_cast<double>(bytes)));
  out.Set("pinned", directionObject(env, timeCopies(bench.tensor, pinnedBase, bytes, repeats)));
  out.Set("pageable", directionObject(env, timeCopies(bench.tensor, bench.pageable, bytes, repeats)));
  return out;
}

void RegisterHostMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("allocPinnedBuffer", Napi::Function::New(env, AllocPinnedBuffer));
  exports.Set("measureHostCopyBandwidth", Napi::Function::New(env, MeasureHostCopyBandwidth));
}

}  // namespace continuum
