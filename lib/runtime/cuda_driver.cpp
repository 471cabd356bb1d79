// The dlopen'd CUDA driver and one GPU's context, stream, memory and kernels (cuda_driver.h).
#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>

#include "fmt/format.h"

namespace lazyjit::runtime::cuda {
namespace {

// The driver's constants this file uses (cuda.h's values).
constexpr int kAttributeMultiprocessors = 16;      // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttributeCapabilityMajor = 75;      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttributeCapabilityMinor = 76;      // ..._MINOR
constexpr int kJitErrorLogBuffer = 5;              // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferBytes = 6;         // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
constexpr unsigned kStreamNonBlocking = 1;         // CU_STREAM_NON_BLOCKING
constexpr int kThreadsPerBlock = 256;
constexpr int kFewestThreadsPerBlock = 32;  // a warp
constexpr int kBlocksPerMultiprocessor = 32;

}  // namespace

absl::StatusOr<Driver> Driver::load() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(fmt::format("no CUDA driver: cannot load libcuda.so.1 ({})", why ? why : "not found"));
  }
  Api api{};
  absl::Status missing;
  auto bind = [&](auto& entry, const char* name) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(library, name));
    if (entry == nullptr && missing.ok()) {
      missing = absl::UnavailableError(fmt::format("the CUDA driver libcuda.so.1 has no {}: it is older than CUDA 12", name));
    }
  };
#define LAZYJIT_BIND(name) bind(api.name, #name)
  LAZYJIT_BIND(cuInit);
  LAZYJIT_BIND(cuDriverGetVersion);
  LAZYJIT_BIND(cuDeviceGetCount);
  LAZYJIT_BIND(cuDeviceGet);
  LAZYJIT_BIND(cuDeviceGetName);
  LAZYJIT_BIND(cuDeviceGetAttribute);
  LAZYJIT_BIND(cuDevicePrimaryCtxRetain);
  LAZYJIT_BIND(cuDevicePrimaryCtxRelease_v2);
  LAZYJIT_BIND(cuCtxSetCurrent);
  LAZYJIT_BIND(cuModuleLoadDataEx);
  LAZYJIT_BIND(cuModuleUnload);
  LAZYJIT_BIND(cuModuleGetFunction);
  LAZYJIT_BIND(cuMemAlloc_v2);
  LAZYJIT_BIND(cuMemFree_v2);
  LAZYJIT_BIND(cuMemcpyHtoDAsync_v2);
  LAZYJIT_BIND(cuMemcpyDtoHAsync_v2);
  LAZYJIT_BIND(cuMemsetD8Async);
  LAZYJIT_BIND(cuStreamCreate);
  LAZYJIT_BIND(cuStreamDestroy_v2);
  LAZYJIT_BIND(cuStreamSynchronize);
  LAZYJIT_BIND(cuLaunchKernel);
  LAZYJIT_BIND(cuEventCreate);
  LAZYJIT_BIND(cuEventDestroy_v2);
  LAZYJIT_BIND(cuEventRecord);
  LAZYJIT_BIND(cuEventSynchronize);
  LAZYJIT_BIND(cuEventElapsedTime);
  LAZYJIT_BIND(cuGetErrorName);
  LAZYJIT_BIND(cuGetErrorString);
#undef LAZYJIT_BIND
  if (!missing.ok()) return missing;
  Driver driver;
  driver.api_ = api;
  if (absl::Status s = driver.check(api.cuInit(0), "cuInit"); !s.ok()) return s;
  if (absl::Status s = driver.check(api.cuDriverGetVersion(&driver.version_), "cuDriverGetVersion"); !s.ok()) return s;
  if (absl::Status s = driver.check(api.cuDeviceGetCount(&driver.devices_), "cuDeviceGetCount"); !s.ok()) return s;
  if (driver.devices_ == 0) return absl::UnavailableError("the CUDA driver sees no GPU");
  return driver;
}

absl::StatusOr<const Driver*> Driver::get() {
  static const absl::StatusOr<Driver> driver = load();
  if (!driver.ok()) return driver.status();
  return &*driver;
}

absl::Status Driver::check(Result result, std::string_view what) const {
  if (result == 0) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName != nullptr) api_.cuGetErrorName(result, &name);
  if (api_.cuGetErrorString != nullptr) api_.cuGetErrorString(result, &text);
  return absl::InternalError(fmt::format("{}: {} ({})", what, name != nullptr ? name : fmt::format("CUDA error {}", result),
                                         text != nullptr ? text : "no description"));
}

absl::StatusOr<std::shared_ptr<Gpu>> Gpu::open(int ordinal) {
  absl::StatusOr<const Driver*> driver = Driver::get();
  if (!driver.ok()) return driver.status();
  const Driver& d = **driver;
  if (ordinal < 0 || ordinal >= d.device_count()) {
    return absl::InvalidArgumentError(fmt::format("cuda:{}: the CUDA driver sees {} GPU{}", ordinal, d.device_count(),
                                                  d.device_count() == 1 ? "" : "s"));
  }
  Device device = 0;
  if (absl::Status s = d.check(d.api().cuDeviceGet(&device, ordinal), "cuDeviceGet"); !s.ok()) return s;
  std::shared_ptr<Gpu> gpu(new Gpu(d, device));
  const Api& api = d.api();
  char name[256] = {};
  int major = 0, minor = 0;
  for (absl::Status s : {d.check(api.cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName"),
                         d.check(api.cuDeviceGetAttribute(&major, kAttributeCapabilityMajor, device), "cuDeviceGetAttribute"),
                         d.check(api.cuDeviceGetAttribute(&minor, kAttributeCapabilityMinor, device), "cuDeviceGetAttribute"),
                         d.check(api.cuDeviceGetAttribute(&gpu->multiprocessors_, kAttributeMultiprocessors, device),
                                 "cuDeviceGetAttribute"),
                         d.check(api.cuDevicePrimaryCtxRetain(&gpu->context_, device), "cuDevicePrimaryCtxRetain")}) {
    if (!s.ok()) return s;
  }
  gpu->name_ = name;
  gpu->capability_ = 10 * major + minor;
  if (absl::Status s = gpu->current(); !s.ok()) return s;
  if (absl::Status s = d.check(api.cuStreamCreate(&gpu->stream_, kStreamNonBlocking), "cuStreamCreate"); !s.ok()) return s;
  return gpu;
}

Gpu::~Gpu() {
  const Api& api = driver_.api();
  if (context_ == nullptr) return;
  api.cuCtxSetCurrent(context_);
  for (auto& [symbol, kernel] : kernels_) api.cuModuleUnload(kernel.first);
  if (stream_ != nullptr) api.cuStreamDestroy_v2(stream_);
  api.cuDevicePrimaryCtxRelease_v2(device_);
}

absl::Status Gpu::current() { return driver_.check(driver_.api().cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

absl::StatusOr<DevicePtr> Gpu::allocate(size_t bytes) {
  std::lock_guard lock(mutex_);
  if (absl::Status s = current(); !s.ok()) return s;
  DevicePtr pointer = 0;
  if (absl::Status s = driver_.check(driver_.api().cuMemAlloc_v2(&pointer, std::max<size_t>(bytes, 1)),
                                     fmt::format("cuMemAlloc of {} bytes on {}", bytes, name_));
      !s.ok()) {
    return s;
  }
  return pointer;
}

void Gpu::release(DevicePtr pointer) {
  std::lock_guard lock(mutex_);
  if (current().ok()) driver_.api().cuMemFree_v2(pointer);
}

absl::Status Gpu::upload(DevicePtr to, const void* from, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = current(); !s.ok()) return s;
  return driver_.check(driver_.api().cuMemcpyHtoDAsync_v2(to, from, bytes, stream_), "cuMemcpyHtoDAsync");
}

absl::Status Gpu::download(void* to, DevicePtr from, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = current(); !s.ok()) return s;
  return driver_.check(driver_.api().cuMemcpyDtoHAsync_v2(to, from, bytes, stream_), "cuMemcpyDtoHAsync");
}

absl::Status Gpu::fill_zero(DevicePtr to, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = current(); !s.ok()) return s;
  return driver_.check(driver_.api().cuMemsetD8Async(to, 0, bytes, stream_), "cuMemsetD8Async");
}

absl::Status Gpu::synchronize() {
  std::lock_guard lock(mutex_);
  if (absl::Status s = current(); !s.ok()) return s;
  return driver_.check(driver_.api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

absl::StatusOr<Function> Gpu::load(const std::string& symbol,
                                    absl::FunctionRef<absl::StatusOr<std::string>()> make_ptx) {
  std::lock_guard lock(mutex_);
  if (auto it = kernels_.find(symbol); it != kernels_.end()) return it->second.second;
  if (absl::Status s = current(); !s.ok()) return s;
  const absl::StatusOr<std::string> ptx = make_ptx();
  if (!ptx.ok()) return ptx.status();
  char log[8192] = {};
  int keys[] = {kJitErrorLogBuffer, kJitErrorLogBufferBytes};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
  Module module = nullptr;
  if (absl::Status s = driver_.check(driver_.api().cuModuleLoadDataEx(&module, ptx->c_str(), 2, keys, values),
                                     "loading the PTX of " + symbol);
      !s.ok()) {
    return absl::Status(s.code(), std::string(s.message()) + ": " + log);
  }
  Function function = nullptr;
  if (absl::Status s = driver_.check(driver_.api().cuModuleGetFunction(&function, module, symbol.c_str()),
                                     "cuModuleGetFunction " + symbol);
      !s.ok()) {
    driver_.api().cuModuleUnload(module);
    return s;
  }
  kernels_.emplace(symbol, std::pair{module, function});
  return function;
}

absl::Status Gpu::launch(Function function, int64_t iterations, std::vector<void*>& params) {
  if (iterations <= 0) return absl::OkStatus();
  std::lock_guard lock(mutex_);
  if (absl::Status s = current(); !s.ok()) return s;
  // Few long iterations (a row kernel's rows, a product's tiles) in blocks of 256 would leave
  // most multiprocessors idle: blocks get smaller until each multiprocessor has two.
  const int64_t multiprocessors = std::max(multiprocessors_, 1);
  int64_t threads = kThreadsPerBlock;
  while (threads > kFewestThreadsPerBlock && iterations < threads * 2 * multiprocessors) threads /= 2;
  const int64_t wanted = (iterations + threads - 1) / threads;
  const auto blocks = static_cast<unsigned>(std::min(wanted, int64_t{kBlocksPerMultiprocessor} * multiprocessors));
  const auto block_threads = static_cast<unsigned>(threads);
  return driver_.check(driver_.api().cuLaunchKernel(function, blocks, 1, 1, block_threads, 1, 1, 0, stream_,
                                                    params.data(), nullptr),
                       "cuLaunchKernel");
}

absl::StatusOr<float> Gpu::time(absl::FunctionRef<absl::Status()> enqueue) {
  const Api& api = driver_.api();
  Event events[2] = {nullptr, nullptr};
  struct Destroy {
    const Api& api;
    Event* events;
    ~Destroy() {
      for (int e = 0; e < 2; ++e) if (events[e] != nullptr) api.cuEventDestroy_v2(events[e]);
    }
  } destroy{api, events};
  auto record = [&](int e) -> absl::Status {
    std::lock_guard lock(mutex_);
    if (absl::Status s = current(); !s.ok()) return s;
    if (absl::Status s = driver_.check(api.cuEventCreate(&events[e], 0), "cuEventCreate"); !s.ok()) return s;
    return driver_.check(api.cuEventRecord(events[e], stream_), "cuEventRecord");
  };
  if (absl::Status s = record(0); !s.ok()) return s;
  if (absl::Status s = enqueue(); !s.ok()) return s;
  if (absl::Status s = record(1); !s.ok()) return s;
  if (absl::Status s = driver_.check(api.cuEventSynchronize(events[1]), "cuEventSynchronize"); !s.ok()) return s;
  float ms = 0;
  if (absl::Status s = driver_.check(api.cuEventElapsedTime(&ms, events[0], events[1]), "cuEventElapsedTime"); !s.ok()) {
    return s;
  }
  return ms;
}

}  // namespace lazyjit::runtime::cuda
