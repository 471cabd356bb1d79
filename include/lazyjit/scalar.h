// A number from user code (`x * 0.5`, `x + 1`) that takes part in a tensor op.
#pragma once

#include <concepts>
#include <cstdint>

namespace lazyjit {

/// A C++ number used as an operand. Like a Python number in PyTorch it is "weak": it does
/// not widen a tensor's dtype within its category (float32 * 0.5 stays float32), but an
/// integer tensor times a floating scalar becomes float32. Its value is a runtime parameter
/// of the compiled kernel, so changing it never recompiles.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Integral, Floating };

  Scalar(bool value) : kind_(Kind::Bool), int_(value) {}  // NOLINT: implicit by design
  template <std::signed_integral T>
  Scalar(T value) : kind_(Kind::Integral), int_(static_cast<int64_t>(value)) {}  // NOLINT
  template <std::unsigned_integral T>
    requires(!std::same_as<T, bool>)
  Scalar(T value)  // NOLINT
      : kind_(Kind::Integral), past_int64_(value > static_cast<uint64_t>(INT64_MAX)),
        int_(static_cast<int64_t>(value)) {}
  template <std::floating_point T>
  Scalar(T value) : kind_(Kind::Floating), float_(static_cast<double>(value)) {}  // NOLINT

  /// This number compiled into the kernel instead of passed at run time: LLVM can fold it
  /// (x * 1.0, x + 0.0), but every new value compiles a new kernel. Opt-in; see constant().
  Scalar as_constant() const {
    Scalar s = *this;
    s.constant_ = true;
    return s;
  }
  bool is_constant() const { return constant_; }

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Floating; }
  /// An unsigned integer at or above 2^63: no int64 holds it (ops check that it fits the
  /// tensor's dtype; a floating dtype takes it as the nearest double).
  bool past_int64() const { return past_int64_; }
  double to_double() const {
    if (is_floating()) return float_;
    return past_int64_ ? static_cast<double>(static_cast<uint64_t>(int_)) : static_cast<double>(int_);
  }
  /// The integer value; for past_int64() its bits, so check fits first.
  int64_t to_int64() const { return is_floating() ? static_cast<int64_t>(float_) : int_; }
  uint64_t to_uint64_bits() const { return static_cast<uint64_t>(int_); }

 private:
  Kind kind_;
  bool constant_ = false;
  bool past_int64_ = false;
  union {
    int64_t int_;
    double float_;
  };
};

/// `value` as a compile-time constant: `x * lazyjit::constant(2.0)`.
inline Scalar constant(Scalar value) { return value.as_constant(); }

}  // namespace lazyjit
