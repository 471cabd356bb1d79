// Tensor: a cheap, shared handle to a lazily computed value.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "lazyjit/dtype.h"
#include "lazyjit/scalar.h"

namespace lazyjit {

namespace detail {
class TensorImpl;
}

/// A materialised tensor's elements read where they lie, without a copy (what libtorch's
/// `data_ptr` and JAX's `np.asarray` give on a CPU), in row-major order. The view holds the
/// tensor's buffer, which keeps its elements unchanged for as long as the view lives: an
/// in-place update of the tensor computes into a new buffer while a view holds the old one (a
/// held buffer is never donated). Made by `Tensor::host_view`.
template <class T>
class HostView {
 public:
  using value_type = T;
  using iterator = typename std::span<const T>::iterator;
  using const_iterator = iterator;

  std::span<const T> elements() const { return elements_; }
  const T* data() const { return elements_.data(); }
  size_t size() const { return elements_.size(); }
  const T& operator[](size_t i) const { return elements_[i]; }
  iterator begin() const { return elements_.begin(); }
  iterator end() const { return elements_.end(); }

 private:
  friend class Tensor;
  HostView(std::span<const T> elements, std::shared_ptr<const void> keep)
      : elements_(elements), keep_(std::move(keep)) {}

  std::span<const T> elements_;
  std::shared_ptr<const void> keep_;
};

/// A handle to a tensor, as `at::Tensor` is: copying a Tensor gives another handle to the same
/// tensor. Ops on tensors record IR instead of running; the value is computed when it is read
/// (`to_vector`, `item`) or at `sync`/`mark_step`. Shapes and dtypes are checked when an op is
/// traced, so a mistake throws `Error` at the call that made it.
///
/// Thread safety: distinct tensors may be used from different threads; one tensor must not be
/// mutated concurrently with other uses of it.
class Tensor {
 public:
  /// An undefined tensor; every op on it throws Error.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  /// Copies `data` into a new tensor of the given shape; throws Error if the element count
  /// differs from the product of `shape` or a dim is negative.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, std::vector<int64_t> shape) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(data.begin(), data.end());
      return from_data(bytes.data(), static_cast<int64_t>(bytes.size()), DType::Bool, std::move(shape));
    } else {
      return from_data(data.data(), static_cast<int64_t>(data.size()), dtype_of_v<T>, std::move(shape));
    }
  }
  /// A 1-D tensor holding `data`.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data) {
    return from_vector(data, {static_cast<int64_t>(data.size())});
  }

  bool defined() const { return impl_ != nullptr; }
  std::vector<int64_t> shape() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;

  /// Materialises the tensor and copies its elements out in row-major order.
  /// Throws Error when T does not match dtype() (use `to(DType)` first).
  /// Out of memory for the copy is an Error naming the tensor, as everywhere.
  template <class T>
  std::vector<T> to_vector() const {
    using Element = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    const int64_t n = numel_for("to_vector");
    if (!fits_in_host_memory(n, sizeof(Element))) throw_out_of_host_memory("to_vector", sizeof(Element));
    std::shared_ptr<const void> keep;
    const auto* first = static_cast<const Element*>(host_elements("to_vector", dtype_of_v<T>, /*copied_out=*/true, keep));
    try {
      return std::vector<T>(first, first + n);  // one pass over fresh memory, not a fill and a copy
    } catch (const std::exception&) {           // bad_alloc, or length_error past max_size()
      throw_out_of_host_memory("to_vector", sizeof(Element));
    }
  }

  /// Materialises the tensor and reads its elements where they lie (see HostView): no copy,
  /// no fresh memory. Throws Error when T does not match dtype(), as to_vector does.
  template <class T>
  HostView<T> host_view() const {
    const int64_t n = numel_for("host_view");
    std::shared_ptr<const void> keep;
    const void* first = host_elements("host_view", dtype_of_v<T>, /*copied_out=*/false, keep);
    // A bool tensor holds a byte of 0 or 1 an element: bool's own representation.
    return HostView<T>(std::span<const T>(static_cast<const T*>(first), static_cast<size_t>(n)), std::move(keep));
  }

  /// The single element of a one-element tensor, converted to T as a C++ cast would.
  /// Throws Error when numel() != 1 or the value does not fit T (1e30 as int64, NaN as int).
  template <class T>
  T item() const {
    Scalar s = item_scalar();
    check_item_fits(s, dtype_of_v<T>);
    if constexpr (std::is_same_v<T, bool>) {
      return s.to_double() != 0.0;
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(s.to_double());
    } else {
      return static_cast<T>(s.to_int64());
    }
  }

  /// A new tensor with the elements converted to `dtype` (C++ conversion rules; float to
  /// integer out of range is unspecified, as in PyTorch).
  Tensor to(DType dtype) const;

  /// In-place updates: the tensor keeps its identity (every handle sees the new value) and gets
  /// a new IR value; tensors computed from its old value keep the old value.
  Tensor& operator+=(const Tensor& other);
  Tensor& operator-=(const Tensor& other);
  Tensor& operator*=(const Tensor& other);
  Tensor& operator/=(const Tensor& other);
  Tensor& operator+=(Scalar other);
  Tensor& operator-=(Scalar other);
  Tensor& operator*=(Scalar other);
  Tensor& operator/=(Scalar other);
  /// Copies `src` (broadcast to this shape, converted to this dtype) into this tensor.
  Tensor& copy_(const Tensor& src);
  /// Named forms of the in-place updates, as in PyTorch: `t.add_(u)` is `t += u`.
  Tensor& add_(const Tensor& other) { return *this += other; }
  Tensor& add_(Scalar other) { return *this += other; }
  Tensor& mul_(const Tensor& other) { return *this *= other; }
  Tensor& mul_(Scalar other) { return *this *= other; }
  /// Sets every element to zero.
  Tensor& zero_();

  /// Autograd in PyTorch's style (see lazyjit/autograd.h for the functional grad()).
  /// Marks the tensor as one whose gradient backward() accumulates into grad(). Only
  /// floating tensors can require gradients. The mark does not spread to results of ops:
  /// there is no tape, the lazy graph itself is what backward() differentiates.
  Tensor& requires_grad_(bool requires_grad = true);
  bool requires_grad() const;
  /// The gradient accumulated by backward() calls (lazy), or an undefined tensor.
  Tensor grad() const;
  /// Drops the accumulated gradient (PyTorch's zero_grad with set_to_none).
  void zero_grad();
  /// For a one-element floating tensor (a loss): adds d(this)/dt to t.grad() for every tensor
  /// t with requires_grad() that this tensor's value depends on. Traces IR only; the gradients
  /// are computed when read or at mark_step().
  void backward() const;
  /// As backward(), seeded with `gradient` (this tensor's shape) for a non-scalar tensor.
  void backward(const Tensor& gradient) const;

  /// "Tensor(float32[2,3])"; does not materialise.
  std::string to_string() const;

  /// Identity: whether two handles refer to the same tensor.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  /// Internal: the implementation object (used by the runtime).
  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  static Tensor from_data(const void* data, int64_t count, DType dtype, std::vector<int64_t> shape);
  /// The materialised elements, checked to be of dtype `requested` (`op` names the reader in
  /// the error); `keep` holds them. `copied_out`: the caller copies them (metrics().bytes_out).
  const void* host_elements(const char* op, DType requested, bool copied_out, std::shared_ptr<const void>& keep) const;
  [[noreturn]] void throw_out_of_host_memory(const char* op, size_t element_size) const;
  /// Whether `count` elements of `element_size` bytes fit in the machine's memory at all.
  static bool fits_in_host_memory(int64_t count, size_t element_size);
  int64_t numel_for(const char* op) const;
  Scalar item_scalar() const;
  static void check_item_fits(Scalar value, DType requested);
  detail::TensorImpl& checked_impl(const char* op) const;

  std::shared_ptr<detail::TensorImpl> impl_;
};

}  // namespace lazyjit
