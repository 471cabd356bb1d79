// Names of dtypes and BackendData's element count (public header helpers).
#include "lazyjit/backend.h"
#include "lazyjit/dtype.h"

namespace lazyjit {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

int64_t BackendData::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

}  // namespace lazyjit
