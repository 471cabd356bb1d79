// Backend interfaces, after torch::lazy's (seeds/002): device data, computations and the
// lowering context a backend implements. Standard library types only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lazyjit/dtype.h"
#include "lazyjit/tensor.h"

namespace lazyjit {

/// A buffer of device memory holding one tensor's elements, row-major and contiguous.
/// Immutable once a tensor owns it, except through donation at the step barrier.
class BackendData {
 public:
  BackendData(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {}
  virtual ~BackendData() = default;
  BackendData(const BackendData&) = delete;
  BackendData& operator=(const BackendData&) = delete;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  int64_t size_bytes() const { return numel() * dtype_size(dtype_); }

  /// Host-addressable elements (CPU backend: the buffer itself; 64-byte aligned).
  virtual void* data() = 0;
  const void* data() const { return const_cast<BackendData*>(this)->data(); }

 private:
  DType dtype_;
  std::vector<int64_t> shape_;
};
using BackendDataPtr = std::shared_ptr<BackendData>;

/// A materialised tensor over `data`, not copied: how a front end hands the runtime memory it
/// owns (PyTorch's storage). `data()` must be 64-byte aligned (Error otherwise). The runtime
/// only reads the buffer, except that a mark_step() may donate it to a result of the same
/// shape once the tensor's value is replaced and nothing else holds `data`; a front end that
/// must keep the buffer's contents keeps a reference to `data` until the step is done.
Tensor tensor_from_data(BackendDataPtr data);

/// The buffer holding `t`'s value, materialising `t` first if it is pending.
BackendDataPtr tensor_data(const Tensor& t);

/// Parameter and result signature of a compiled graph.
struct TensorSignature {
  DType dtype;
  std::vector<int64_t> shape;
};

/// A graph lowered for a backend, ready to compile: what it reads and what it writes.
class Computation {
 public:
  virtual ~Computation() = default;
  virtual const std::vector<TensorSignature>& parameter_shapes() const = 0;
  virtual const std::vector<TensorSignature>& result_shapes() const = 0;
  /// Backend-specific text of the computation (LLVM IR for the CPU backend).
  virtual std::string to_string() const = 0;
};

/// Turns a graph into a Computation, as torch::lazy::LoweringContext does: parameters are
/// the graph's device-data leaves in post-order, results its roots in order. A backend's
/// context is created over one graph (lib/runtime/lowering_context.h for the LLVM backend).
class LoweringContext {
 public:
  virtual ~LoweringContext() = default;
  /// Lowers the graph. Throws Error on a graph the backend cannot lower.
  virtual std::unique_ptr<Computation> build() = 0;
};

}  // namespace lazyjit
