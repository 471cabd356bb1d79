// HostBuffer allocation.
#include "ir/host_buffer.h"

#include <cstring>

#include "fmt/format.h"
#include "lazyjit/error.h"

namespace lazyjit::ir {

HostBuffer::HostBuffer(DType dtype, std::vector<int64_t> shape) : BackendData(dtype, std::move(shape)) {
  const size_t bytes = (static_cast<size_t>(size_bytes()) + 63) / 64 * 64 + 64;
  data_ = std::aligned_alloc(64, bytes);
  if (data_ == nullptr) throw Error(fmt::format("out of memory allocating a buffer of {} bytes", bytes));
  std::memset(data_, 0, bytes);
}

}  // namespace lazyjit::ir
