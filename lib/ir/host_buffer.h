// HostBuffer: a BackendData in plain host memory, for graphs read from text and for tools.
#pragma once

#include <cstdlib>
#include <memory>

#include "lazyjit/backend.h"

namespace lazyjit::ir {

/// 64-byte aligned, zero-filled host memory for one tensor. The runtime's CpuBuffer is the
/// pooled equivalent; kernels read either through data().
class HostBuffer final : public BackendData {
 public:
  HostBuffer(DType dtype, std::vector<int64_t> shape);
  ~HostBuffer() override { std::free(data_); }
  void* data() override { return data_; }

 private:
  void* data_ = nullptr;
};

}  // namespace lazyjit::ir
