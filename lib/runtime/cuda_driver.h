// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") (DESIGN.md section 11):
// the few functions the GPU runtime calls, declared here, so that building lazyjit needs no
// CUDA header or toolkit and a machine without a GPU builds and runs everything else.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace lazyjit::runtime::cuda {

using Result = int;  ///< CUresult: 0 is success
using Device = int;  ///< CUdevice
using DevicePtr = uint64_t;  ///< CUdeviceptr
using Context = struct CUctx_st*;
using Module = struct CUmod_st*;
using Function = struct CUfunc_st*;
using Stream = struct CUstream_st*;
using Event = struct CUevent_st*;

/// The driver's entry points, under the names libcuda.so.1 exports (the _v2 ones where the
/// CUDA header renames them).
struct Api {
  Result (*cuInit)(unsigned flags);
  Result (*cuDriverGetVersion)(int* version);
  Result (*cuDeviceGetCount)(int* count);
  Result (*cuDeviceGet)(Device* device, int ordinal);
  Result (*cuDeviceGetName)(char* name, int length, Device device);
  Result (*cuDeviceGetAttribute)(int* value, int attribute, Device device);
  Result (*cuDevicePrimaryCtxRetain)(Context* context, Device device);
  Result (*cuDevicePrimaryCtxRelease_v2)(Device device);
  Result (*cuCtxSetCurrent)(Context context);
  Result (*cuModuleLoadDataEx)(Module* module, const void* image, unsigned options, int* keys, void** values);
  Result (*cuModuleUnload)(Module module);
  Result (*cuModuleGetFunction)(Function* function, Module module, const char* name);
  Result (*cuMemAlloc_v2)(DevicePtr* pointer, size_t bytes);
  Result (*cuMemFree_v2)(DevicePtr pointer);
  Result (*cuMemcpyHtoDAsync_v2)(DevicePtr to, const void* from, size_t bytes, Stream stream);
  Result (*cuMemcpyDtoHAsync_v2)(void* to, DevicePtr from, size_t bytes, Stream stream);
  Result (*cuMemsetD8Async)(DevicePtr to, unsigned char value, size_t bytes, Stream stream);
  Result (*cuStreamCreate)(Stream* stream, unsigned flags);
  Result (*cuStreamDestroy_v2)(Stream stream);
  Result (*cuStreamSynchronize)(Stream stream);
  Result (*cuLaunchKernel)(Function function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                           unsigned block_y, unsigned block_z, unsigned shared_bytes, Stream stream, void** params,
                           void** extra);
  Result (*cuEventCreate)(Event* event, unsigned flags);
  Result (*cuEventDestroy_v2)(Event event);
  Result (*cuEventRecord)(Event event, Stream stream);
  Result (*cuEventSynchronize)(Event event);
  Result (*cuEventElapsedTime)(float* milliseconds, Event start, Event end);
  Result (*cuGetErrorName)(Result result, const char** name);
  Result (*cuGetErrorString)(Result result, const char** text);
};

/// The loaded driver: one per process, never unloaded.
class Driver {
 public:
  /// The driver, loaded and initialised on first use, or why there is none: no libcuda.so.1,
  /// a symbol missing from it, or cuInit's error (no device, say).
  static absl::StatusOr<const Driver*> get();

  const Api& api() const { return api_; }
  /// OK for success, else an error naming `what` and the driver's name and text for `result`,
  /// e.g. "cuMemAlloc of 1024 bytes: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  absl::Status check(Result result, std::string_view what) const;
  int version() const { return version_; }  ///< e.g. 13000 for CUDA 13.0
  int device_count() const { return devices_; }

 private:
  static absl::StatusOr<Driver> load();

  Api api_{};
  int version_ = 0;
  int devices_ = 0;
};

/// One GPU: its primary context, one stream, and the kernels loaded on it (by symbol: a
/// kernel's PTX is loaded once). Calls from several threads are serialised.
class Gpu {
 public:
  /// GPU `ordinal`, or why it cannot be opened.
  static absl::StatusOr<std::shared_ptr<Gpu>> open(int ordinal);
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  const std::string& name() const { return name_; }
  /// Compute capability as a number: 90 for an H100.
  int capability() const { return capability_; }
  int multiprocessors() const { return multiprocessors_; }

  absl::StatusOr<DevicePtr> allocate(size_t bytes);
  void release(DevicePtr pointer);
  /// Copies on the stream: ordered with the launches; the host memory must stay valid until
  /// the next synchronize().
  absl::Status upload(DevicePtr to, const void* from, size_t bytes);
  absl::Status download(void* to, DevicePtr from, size_t bytes);
  absl::Status fill_zero(DevicePtr to, size_t bytes);
  absl::Status synchronize();

  /// The function `symbol`: its module loaded from the PTX `make_ptx` gives the first time,
  /// then kept. Errors: make_ptx's, or the driver's with its JIT log.
  absl::StatusOr<Function> load(const std::string& symbol,
                                absl::FunctionRef<absl::StatusOr<std::string>()> make_ptx);
  /// Launches `function` over `iterations` of a grid-stride loop (kPtxAbiVersion): 256
  /// threads a block, or as few as 32 where that gives each multiprocessor two blocks; at
  /// most 32 blocks per multiprocessor.
  absl::Status launch(Function function, int64_t iterations, std::vector<void*>& params);
  /// The GPU's milliseconds, between events recorded around them on the stream, for the work
  /// `enqueue` queues there; waits for that work to finish.
  absl::StatusOr<float> time(absl::FunctionRef<absl::Status()> enqueue);

 private:
  Gpu(const Driver& driver, Device device) : driver_(driver), device_(device) {}
  absl::Status current();

  const Driver& driver_;
  Device device_;
  Context context_ = nullptr;
  Stream stream_ = nullptr;
  std::string name_;
  int capability_ = 0;
  int multiprocessors_ = 0;
  std::mutex mutex_;
  absl::flat_hash_map<std::string, std::pair<Module, Function>> kernels_;
};

}  // namespace lazyjit::runtime::cuda
