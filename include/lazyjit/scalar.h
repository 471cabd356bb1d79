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
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Scalar(T value) : kind_(Kind::Integral), int_(static_cast<int64_t>(value)) {}  // NOLINT
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
  double to_double() const { return is_floating() ? float_ : static_cast<double>(int_); }
  int64_t to_int64() const { return is_floating() ? static_cast<int64_t>(float_) : int_; }

 private:
  Kind kind_;
  bool constant_ = false;
  union {
    int64_t int_;
    double float_;
  };
};

/// `value` as a compile-time constant: `x * lazyjit::constant(2.0)`.
inline Scalar constant(Scalar value) { return value.as_constant(); }

}  // namespace lazyjit
