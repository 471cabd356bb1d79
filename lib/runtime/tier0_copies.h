// Tier 0's element copies by element size (1, 4 or 8 bytes): gathers, scatters, strided and
// two-dimensional copies, fills and broadcasts, which the runner's loads, stores and copy
// nests call. Internal to lib/runtime (tier0_runner.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/tier0_blocks.h"

namespace lazyjit::runtime::tier0 {

/// Copies `n` elements of `size` bytes; bool values are read as 0 or 1.
inline void copy_elements(std::byte* out, const std::byte* in, int64_t n, int64_t size, bool boolean) {
  std::memcpy(out, in, static_cast<size_t>(n * size));
  if (boolean) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::byte{out[i] != std::byte{0}};
  }
}

/// Calls F<T>{}(a...) with T the unsigned integer of `size` bytes (1, 4 or 8): the copies
/// below move elements as such integers.
template <template <class> class F, class... A>
void by_size(int64_t size, A... a) {
  if (size == 1) F<uint8_t>{}(a...);
  else if (size == 4) F<uint32_t>{}(a...);
  else F<uint64_t>{}(a...);
}

/// out[i] = in[offsets[i]] for i < n.
template <class T> struct Gather {
  void operator()(std::byte* out, const std::byte* in, const int64_t* offsets, int64_t n) const {
    T* o = reinterpret_cast<T*>(out);
    const T* x = reinterpret_cast<const T*>(in);
    for (int64_t i = 0; i < n; ++i) o[i] = x[offsets[i]];
  }
};
/// out[i] = in[base + stride * i] for i < n.
template <class T> struct Strided {
  void operator()(std::byte* out, const std::byte* in, int64_t base, int64_t stride, int64_t n) const {
    T* o = reinterpret_cast<T*>(out);
    const T* x = reinterpret_cast<const T*>(in);
    for (int64_t i = 0; i < n; ++i) o[i] = x[base + stride * i];
  }
};
/// out[offsets[i]] = in[i] for i < n.
template <class T> struct Scatter {
  void operator()(std::byte* out, const std::byte* in, const int64_t* offsets, int64_t n) const {
    T* o = reinterpret_cast<T*>(out);
    const T* x = reinterpret_cast<const T*>(in);
    for (int64_t i = 0; i < n; ++i) o[offsets[i]] = x[i];
  }
};
/// out[base + stride * i] = in[i] for i < n.
template <class T> struct ScatterStrided {
  void operator()(std::byte* out, const std::byte* in, int64_t base, int64_t stride, int64_t n) const {
    T* o = reinterpret_cast<T*>(out);
    const T* x = reinterpret_cast<const T*>(in);
    for (int64_t i = 0; i < n; ++i) o[base + stride * i] = x[i];
  }
};
/// A copy nest's store (tier0::CopyNest): rows of n elements, out's and in's rows and
/// elements `*_row` and `*_col` elements apart. Contiguous rows of kCopyRowsMinBytes to
/// kCopyRowsBytes take BlockTable::copy_rows instead.
template <class T> struct Copy2d {
  void operator()(std::byte* out, int64_t out_row, int64_t out_col, const std::byte* in, int64_t in_row,
                  int64_t in_col, int64_t rows, int64_t n) const {
    T* o = reinterpret_cast<T*>(out);
    const T* x = reinterpret_cast<const T*>(in);
    // The rows of a copy nest do not overlap. Rows under kCopyRowsMinBytes (a pack of A's 6
    // rows per step of K, from a transposed operand) copy element by element: a call of
    // memmove per row of a few elements costs more than the row.
    const bool short_rows = n * static_cast<int64_t>(sizeof(T)) < kCopyRowsMinBytes;
    for (int64_t r = 0; r < rows; ++r, o += out_row, x += in_row) {
      if (out_col == 1 && in_col == 1 && !short_rows) {
        std::memmove(o, x, static_cast<size_t>(n) * sizeof(T));
      } else if (out_col == 1 && in_col == 1) {
        for (int64_t j = 0; j < n; ++j) o[j] = x[j];
      } else {
        for (int64_t j = 0; j < n; ++j) o[j * out_col] = x[j * in_col];
      }
    }
  }
};
template <class T> struct Fill2d {
  void operator()(std::byte* out, int64_t out_row, int64_t out_col, const void* value, int64_t rows, int64_t n) const {
    T v;
    std::memcpy(&v, value, sizeof v);
    T* o = reinterpret_cast<T*>(out);
    for (int64_t r = 0; r < rows; ++r, o += out_row) {
      for (int64_t j = 0; j < n; ++j) o[j * out_col] = v;
    }
  }
};
template <class T> struct Broadcast {
  void operator()(std::byte* out, const void* value, int64_t n) const {
    T v;
    std::memcpy(&v, value, sizeof v);
    T* o = reinterpret_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
};

}  // namespace lazyjit::runtime::tier0
