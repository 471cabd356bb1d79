// A BackendData over host memory, for the Parameter leaves of tests' graphs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lazyjit/backend.h"

namespace lazyjit::test {

/// A BackendData over host memory, zero-filled.
class HostData final : public BackendData {
 public:
  HostData(DType dtype, std::vector<int64_t> shape) : BackendData(dtype, std::move(shape)) {
    bytes_.resize(static_cast<size_t>(std::max<int64_t>(size_bytes(), 1)));
  }
  void* data() override { return bytes_.data(); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace lazyjit::test
