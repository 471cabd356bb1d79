// The C++ numbers the fuzzer passes as Scalars (bool, int64_t, uint64_t, double, float), with
// their exact values and their C++ spelling for the printed program.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fmt/format.h"
#include "lazyjit/scalar.h"

namespace lazyjit::fuzz {

/// A number of one C++ type. `integer` holds the exact value of Bool, Int64 and UInt64 (an
/// unsigned value past INT64_MAX included), `real` the value of Double and Float.
struct Number {
  enum class Type { Bool, Int64, UInt64, Double, Float };
  Type type = Type::Int64;
  __int128 integer = 0;
  double real = 0;

  static Number boolean(bool v) { return {Type::Bool, v, 0}; }
  static Number int64(int64_t v) { return {Type::Int64, v, 0}; }
  static Number uint64(uint64_t v) { return {Type::UInt64, static_cast<__int128>(v), 0}; }
  static Number float64(double v) { return {Type::Double, 0, v}; }
  static Number float32(float v) { return {Type::Float, 0, static_cast<double>(v)}; }

  bool is_real() const { return type == Type::Double || type == Type::Float; }
  Scalar::Kind kind() const {
    return type == Type::Bool ? Scalar::Kind::Bool : is_real() ? Scalar::Kind::Floating : Scalar::Kind::Integral;
  }

  /// The Scalar that C++ code passing this number gets.
  Scalar scalar() const {
    switch (type) {
      case Type::Bool: return Scalar(integer != 0);
      case Type::Int64: return Scalar(static_cast<int64_t>(integer));
      case Type::UInt64: return Scalar(static_cast<uint64_t>(integer));
      case Type::Double: return Scalar(real);
      case Type::Float: return Scalar(static_cast<float>(real));
    }
    return Scalar(0);
  }

  std::string text() const {
    switch (type) {
      case Type::Bool: return integer != 0 ? "true" : "false";
      case Type::Int64: return integer_text(static_cast<int64_t>(integer));
      case Type::UInt64: return fmt::format("uint64_t{{{}u}}", static_cast<uint64_t>(integer));
      case Type::Double: return real_text(real, "");
      case Type::Float: return real_text(real, "f");
    }
    return "?";
  }

  /// A C++ literal for `v`; the extremes by name (a literal INT64_MIN does not parse).
  static std::string integer_text(int64_t v) {
    if (v == std::numeric_limits<int64_t>::min()) return "INT64_MIN";
    if (v == std::numeric_limits<int64_t>::max()) return "INT64_MAX";
    return fmt::format("int64_t{{{}}}", v);
  }

  static std::string real_text(double v, const char* suffix) {
    if (std::isnan(v)) return std::signbit(v) ? "-NAN" : "NAN";
    if (std::isinf(v)) return v < 0 ? "-INFINITY" : "INFINITY";
    std::string text = fmt::format("{}", v);
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    return text + suffix;
  }
};

}  // namespace lazyjit::fuzz
