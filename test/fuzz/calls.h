// The fuzzer's creation and elementwise calls (arithmetic with tensors and numbers, math,
// comparisons, where, clamp, casts), each with random and sometimes invalid arguments.
#pragma once

#include <vector>

#include "values.h"
#include "ir/dtype_dispatch.h"

namespace lazyjit::fuzz {

using Args = std::vector<Tensor>;
using Binary = Tensor (*)(const Tensor&, const Tensor&);
using WithScalar = Tensor (*)(const Tensor&, Scalar);
using ScalarFirst = Tensor (*)(Scalar, const Tensor&);
using Unary = Tensor (*)(const Tensor&);

inline Call make_call(std::string text, std::vector<int> inputs, std::function<Tensor(const Args&)> run, Expect e,
                      Numerics numerics = Numerics::Exact) {
  return Call{std::move(text), std::move(inputs), std::move(run), std::move(e), numerics};
}

// ---- creation

/// A from_vector call of `shape` (a tenth of the time with a wrong count or a negative dim
/// when `may_fail`); returns the slot of the new tensor or -1.
inline int make_leaf(Program& p, DType dtype, const Dims& shape, bool may_fail = false) {
  Rng& r = p.rng();
  Dims given = shape;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (may_fail && r.chance(0.1)) {
    if (r.chance(0.5) || given.empty()) count += count > 0 ? r.pick<int64_t>({-1, 1}) : 1;
    else given[static_cast<size_t>(r.range(0, static_cast<int64_t>(given.size()) - 1))] = -r.range(1, 3);
  }
  return ir::dispatch_dtype(dtype, [&]<class T>(T) {
    std::vector<T> values = random_values<T>(r, count);
    Expect e = expect([&] {
      contract::check_dims(given);
      if (contract::element_count(given) != static_cast<long double>(count)) throw Reject{"the count does not fill the shape"};
      return Meta{dtype, given};
    });
    return p.apply(make_call(
        fmt::format("Tensor::from_vector<{}>({}, {})", cpp_type<T>(), values_text(values), dims_text(given)), {},
        [values, given](const Args&) { return Tensor::from_vector(values, given); }, std::move(e)));
  });
}

inline void gen_from_vector(Program& p) { make_leaf(p, random_dtype(p.rng()), random_shape(p.rng()), true); }

inline void gen_full(Program& p) {
  Rng& r = p.rng();
  const Dims shape = maybe_unusual_shape(r);
  const DType dtype = random_dtype(r);
  const int64_t kind = r.range(0, 3);
  const Number n = kind == 0 ? Number::int64(0) : kind == 1 ? Number::int64(1) : random_number(r);
  const std::string args = fmt::format("{}, {}", dims_text(shape), dtype_text(dtype));
  if (kind == 0) {
    p.apply(make_call("lazyjit::zeros(" + args + ")", {}, [=](const Args&) { return zeros(shape, dtype); },
                      expect([&] { return contract::full(shape, n, dtype); })));
  } else if (kind == 1) {
    p.apply(make_call("lazyjit::ones(" + args + ")", {}, [=](const Args&) { return ones(shape, dtype); },
                      expect([&] { return contract::full(shape, n, dtype); })));
  } else {
    p.apply(make_call(fmt::format("lazyjit::full({}, {}, {})", dims_text(shape), n.text(), dtype_text(dtype)), {},
                      [=](const Args&) { return lazyjit::full(shape, n.scalar(), dtype); },
                      expect([&] { return contract::full(shape, n, dtype); })));
  }
}

inline void gen_arange(Program& p) {
  Rng& r = p.rng();
  const int64_t n = r.chance(0.9) ? r.range(0, 12) : r.pick<int64_t>({-1, -5, int64_t{1} << 31, (int64_t{1} << 31) + 1,
                                                                       int64_t{1} << 62});
  const DType dtype = random_dtype(r);
  p.apply(make_call(fmt::format("lazyjit::arange({}, {})", n, dtype_text(dtype)), {},
                    [=](const Args&) { return lazyjit::arange(n, dtype); },
                    expect([&] { return contract::arange(n, dtype); })));
}

inline void gen_random(Program& p) {
  Rng& r = p.rng();
  const Dims shape = maybe_unusual_shape(r);
  const uint64_t seed = r.chance(0.8) ? static_cast<uint64_t>(r.range(0, 99)) : r.bits();
  const DType dtype = r.chance(0.8) ? r.pick({DType::Float32, DType::Float64}) : random_dtype(r);
  const bool normal = r.chance(0.5);
  p.apply(make_call(fmt::format("lazyjit::{}({}, {}u, {})", normal ? "randn" : "rand", dims_text(shape), seed,
                                dtype_text(dtype)),
                    {},
                    [=](const Args&) { return normal ? randn(shape, seed, dtype) : rand(shape, seed, dtype); },
                    expect([&] { return contract::random(shape, dtype); }), normal ? Numerics::Rounds : Numerics::Exact));
}

// ---- operands

/// A slot whose shape broadcasts with slot `a`'s: an existing one, a new leaf, or now and
/// then any slot at all.
inline int operand_like(Program& p, int a, DType dtype) {
  Rng& r = p.rng();
  const Dims shape = p.meta(a).shape;
  if (r.chance(0.08)) return p.pick();
  if (r.chance(0.5)) {
    const int start = p.pick();
    for (int k = 0; k < p.size(); ++k) {
      const int s = (start + k) % p.size();
      if (expect([&] { return Meta{DType::Bool, contract::broadcast(shape, p.meta(s).shape)}; }).verdict ==
          Expect::Verdict::Valid) {
        return s;
      }
    }
  }
  const int slot = make_leaf(p, dtype, compatible_shape(r, shape));
  return slot >= 0 ? slot : p.pick();
}

inline int operand_like(Program& p, int a) { return operand_like(p, a, random_dtype(p.rng())); }

// ---- elementwise

struct BinaryOp {
  const char* name;
  const char* symbol;  ///< the operator spelling, or null
  Family family;
  Numerics numerics;
  Binary fn;
  Binary op = nullptr;  ///< the operator, or null
  bool amplifies = false;
};

inline const BinaryOp kBinaryOps[] = {
    {"add", "+", Family::Any, Numerics::Exact, [](const Tensor& a, const Tensor& b) { return add(a, b); },
     [](const Tensor& a, const Tensor& b) { return a + b; }},
    {"sub", "-", Family::Numeric, Numerics::Exact, [](const Tensor& a, const Tensor& b) { return sub(a, b); },
     [](const Tensor& a, const Tensor& b) { return a - b; }},
    {"mul", "*", Family::Any, Numerics::Exact, [](const Tensor& a, const Tensor& b) { return mul(a, b); },
     [](const Tensor& a, const Tensor& b) { return a * b; }},
    {"div", "/", Family::Floating, Numerics::Exact, [](const Tensor& a, const Tensor& b) { return div(a, b); },
     [](const Tensor& a, const Tensor& b) { return a / b; }, true},
    {"pow", nullptr, Family::Numeric, Numerics::Rounds, [](const Tensor& a, const Tensor& b) { return pow(a, b); },
     nullptr, true},
    {"maximum", nullptr, Family::Any, Numerics::Exact, lazyjit::maximum},
    {"minimum", nullptr, Family::Any, Numerics::Exact, lazyjit::minimum},
    {"eq", nullptr, Family::Compare, Numerics::Steps, [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
    {"ne", nullptr, Family::Compare, Numerics::Steps, [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
    {"lt", nullptr, Family::Compare, Numerics::Steps, [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
    {"le", nullptr, Family::Compare, Numerics::Steps, [](const Tensor& a, const Tensor& b) { return le(a, b); }},
    {"gt", nullptr, Family::Compare, Numerics::Steps, [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
    {"ge", nullptr, Family::Compare, Numerics::Steps, [](const Tensor& a, const Tensor& b) { return ge(a, b); }},
    {"logical_and", nullptr, Family::Logical, Numerics::Steps, lazyjit::logical_and},
    {"logical_or", nullptr, Family::Logical, Numerics::Steps, lazyjit::logical_or},
};

inline void gen_binary(Program& p) {
  Rng& r = p.rng();
  const BinaryOp& op = kBinaryOps[r.range(0, std::size(kBinaryOps) - 1)];
  const int a = p.pick();
  const int b = operand_like(p, a);
  if (b < 0 || p.failed()) return;
  const bool symbol = op.symbol != nullptr && r.chance(0.5);
  const std::string text = symbol ? fmt::format("{} {} {}", p.name(a), op.symbol, p.name(b))
                                  : fmt::format("lazyjit::{}({}, {})", op.name, p.name(a), p.name(b));
  const Binary fn = symbol ? op.op : op.fn;
  Call c = make_call(text, {a, b}, [fn](const Args& in) { return fn(in[0], in[1]); },
                     expect([&] { return contract::binary(op.family, p.meta(a), p.meta(b)); }), op.numerics);
  c.amplifies = op.amplifies;
  p.apply(std::move(c));
}

struct ScalarOp {
  const char* spelling;  ///< an operator symbol, or a function name
  Family family;
  Numerics numerics;
  WithScalar fn;
  ScalarFirst reversed;  ///< the number on the left, or null
  bool amplifies = false;
};

inline const ScalarOp kScalarOps[] = {
    {"+", Family::Any, Numerics::Exact, [](const Tensor& t, Scalar s) { return t + s; },
     [](Scalar s, const Tensor& t) { return s + t; }},
    {"-", Family::Numeric, Numerics::Exact, [](const Tensor& t, Scalar s) { return t - s; },
     [](Scalar s, const Tensor& t) { return s - t; }},
    {"*", Family::Any, Numerics::Exact, [](const Tensor& t, Scalar s) { return t * s; },
     [](Scalar s, const Tensor& t) { return s * t; }},
    {"/", Family::Floating, Numerics::Exact, [](const Tensor& t, Scalar s) { return t / s; },
     [](Scalar s, const Tensor& t) { return s / t; }, true},
    {"pow", Family::Numeric, Numerics::Rounds, [](const Tensor& t, Scalar s) { return pow(t, s); }, nullptr, true},
    {"eq", Family::Compare, Numerics::Steps, [](const Tensor& t, Scalar s) { return eq(t, s); }, nullptr},
    {"ne", Family::Compare, Numerics::Steps, [](const Tensor& t, Scalar s) { return ne(t, s); }, nullptr},
    {"lt", Family::Compare, Numerics::Steps, [](const Tensor& t, Scalar s) { return lt(t, s); }, nullptr},
    {"le", Family::Compare, Numerics::Steps, [](const Tensor& t, Scalar s) { return le(t, s); }, nullptr},
    {"gt", Family::Compare, Numerics::Steps, [](const Tensor& t, Scalar s) { return gt(t, s); }, nullptr},
    {"ge", Family::Compare, Numerics::Steps, [](const Tensor& t, Scalar s) { return ge(t, s); }, nullptr},
};

/// A number operand: the Scalar, its spelling, and (now and then) compiled in as a constant.
struct NumberArg {
  Number number;
  Scalar scalar;
  std::string text;
};

inline NumberArg number_arg(Rng& r) {
  const Number n = random_number(r);
  if (r.chance(0.05)) return {n, n.scalar().as_constant(), "lazyjit::constant(" + n.text() + ")"};
  return {n, n.scalar(), n.text()};
}

inline void gen_binary_scalar(Program& p) {
  Rng& r = p.rng();
  const ScalarOp& op = kScalarOps[r.range(0, std::size(kScalarOps) - 1)];
  const int a = p.pick();
  const NumberArg n = number_arg(r);
  const bool reversed = op.reversed != nullptr && r.chance(0.4);
  const bool symbol = op.reversed != nullptr;
  const std::string text = reversed ? fmt::format("{} {} {}", n.text, op.spelling, p.name(a))
                           : symbol ? fmt::format("{} {} {}", p.name(a), op.spelling, n.text)
                                    : fmt::format("lazyjit::{}({}, {})", op.spelling, p.name(a), n.text);
  const WithScalar fn = op.fn;
  const ScalarFirst rfn = op.reversed;
  const Scalar s = n.scalar;
  Call c = make_call(text, {a}, [=](const Args& in) { return reversed ? rfn(s, in[0]) : fn(in[0], s); },
                     expect([&] { return contract::binary_scalar(op.family, p.meta(a), n.number); }), op.numerics);
  c.amplifies = op.amplifies;
  p.apply(std::move(c));
}

struct UnaryOp {
  const char* name;
  Family family;
  Numerics numerics;
  Unary fn;
  bool amplifies = false;
};

inline const UnaryOp kUnaryOps[] = {
    {"neg", Family::Numeric, Numerics::Exact, lazyjit::neg},
    {"abs", Family::Numeric, Numerics::Exact, lazyjit::abs},
    {"exp", Family::Floating, Numerics::Rounds, lazyjit::exp, true},
    {"log", Family::Floating, Numerics::Rounds, lazyjit::log, true},
    {"sqrt", Family::Floating, Numerics::Exact, lazyjit::sqrt, true},
    {"rsqrt", Family::Floating, Numerics::Rounds, lazyjit::rsqrt, true},
    {"sin", Family::Floating, Numerics::Rounds, lazyjit::sin},
    {"cos", Family::Floating, Numerics::Rounds, lazyjit::cos},
    {"tanh", Family::Floating, Numerics::Rounds, lazyjit::tanh},
    {"sigmoid", Family::Floating, Numerics::Rounds, lazyjit::sigmoid},
    {"relu", Family::Numeric, Numerics::Exact, lazyjit::relu},
    {"gelu", Family::Floating, Numerics::Rounds, lazyjit::gelu},
    {"erf", Family::Floating, Numerics::Rounds, lazyjit::erf},
    {"logical_not", Family::Logical, Numerics::Steps, lazyjit::logical_not},
};

inline void gen_unary(Program& p) {
  Rng& r = p.rng();
  const UnaryOp& op = kUnaryOps[r.range(0, std::size(kUnaryOps) - 1)];
  const int a = p.pick();
  const bool minus = op.fn == kUnaryOps[0].fn && r.chance(0.5);
  const std::string text = minus ? "-" + p.name(a) : fmt::format("lazyjit::{}({})", op.name, p.name(a));
  const Unary fn = minus ? [](const Tensor& t) { return -t; } : op.fn;
  Call c = make_call(text, {a}, [fn](const Args& in) { return fn(in[0]); },
                     expect([&] { return contract::unary(op.family, p.meta(a)); }), op.numerics);
  c.amplifies = op.amplifies;
  p.apply(std::move(c));
}

/// A bool slot that broadcasts with slot `a`'s (new when none does), or any slot.
inline int condition_like(Program& p, int a) {
  if (p.rng().chance(0.06)) return p.pick();
  for (int s = 0; s < p.size(); ++s) {
    if (p.meta(s).dtype != DType::Bool || p.rng().chance(0.3)) continue;
    if (expect([&] { return Meta{DType::Bool, contract::broadcast(p.meta(a).shape, p.meta(s).shape)}; }).verdict ==
        Expect::Verdict::Valid) {
      return s;
    }
  }
  return operand_like(p, a, DType::Bool);
}

inline void gen_where(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const int cond = condition_like(p, a);
  if (p.failed()) return;
  const int mode = static_cast<int>(r.range(0, 2));
  if (mode == 0) {
    const int b = operand_like(p, a);
    if (p.failed()) return;
    p.apply(make_call(fmt::format("lazyjit::where({}, {}, {})", p.name(cond), p.name(a), p.name(b)), {cond, a, b},
                      [](const Args& in) { return where(in[0], in[1], in[2]); },
                      expect([&] { return contract::where(p.meta(cond), p.meta(a), p.meta(b)); })));
    return;
  }
  const NumberArg n = number_arg(r);
  const Scalar s = n.scalar;
  const bool left = mode == 1;
  p.apply(make_call(fmt::format("lazyjit::where({}, {}, {})", p.name(cond), left ? n.text : p.name(a),
                                left ? p.name(a) : n.text),
                    {cond, a},
                    [=](const Args& in) { return left ? where(in[0], s, in[1]) : where(in[0], in[1], s); },
                    expect([&] { return contract::where_scalar(p.meta(cond), p.meta(a), n.number); })));
}

inline void gen_clamp(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const NumberArg lo = number_arg(r), hi = number_arg(r);
  const Scalar l = lo.scalar, h = hi.scalar;
  p.apply(make_call(fmt::format("lazyjit::clamp({}, {}, {})", p.name(a), lo.text, hi.text), {a},
                    [=](const Args& in) { return clamp(in[0], l, h); },
                    expect([&] { return contract::clamp(p.meta(a), lo.number, hi.number); })));
}

inline void gen_cast(Program& p) {
  const int a = p.pick();
  const DType to = random_dtype(p.rng());
  const bool steps = is_floating(p.meta(a).dtype) && !is_floating(to);
  p.apply(make_call(fmt::format("{}.to({})", p.name(a), dtype_text(to)), {a},
                    [to](const Args& in) { return in[0].to(to); },
                    expect([&] { return Meta{to, p.meta(a).shape}; }), steps ? Numerics::Steps : Numerics::Exact));
}

}  // namespace lazyjit::fuzz
