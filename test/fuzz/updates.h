// The fuzzer's in-place updates (+= -= *= /= with tensors and numbers, add_, mul_, copy_,
// zero_) and calls on undefined tensors, which must throw Error.
#pragma once

#include "calls.h"

namespace lazyjit::fuzz {

struct UpdateOp {
  const char* spelling;
  Family family;
  Tensor& (*with_tensor)(Tensor&, const Tensor&);
  Tensor& (*with_number)(Tensor&, Scalar);
};

inline const UpdateOp kUpdateOps[] = {
    {"+=", Family::Any, [](Tensor& t, const Tensor& u) -> Tensor& { return t += u; },
     [](Tensor& t, Scalar s) -> Tensor& { return t += s; }},
    {"-=", Family::Numeric, [](Tensor& t, const Tensor& u) -> Tensor& { return t -= u; },
     [](Tensor& t, Scalar s) -> Tensor& { return t -= s; }},
    {"*=", Family::Any, [](Tensor& t, const Tensor& u) -> Tensor& { return t *= u; },
     [](Tensor& t, Scalar s) -> Tensor& { return t *= s; }},
    {"/=", Family::Floating, [](Tensor& t, const Tensor& u) -> Tensor& { return t /= u; },
     [](Tensor& t, Scalar s) -> Tensor& { return t /= s; }},
    {".add_", Family::Any, [](Tensor& t, const Tensor& u) -> Tensor& { return t.add_(u); },
     [](Tensor& t, Scalar s) -> Tensor& { return t.add_(s); }},
    {".mul_", Family::Any, [](Tensor& t, const Tensor& u) -> Tensor& { return t.mul_(u); },
     [](Tensor& t, Scalar s) -> Tensor& { return t.mul_(s); }},
};

inline std::string update_text(const UpdateOp& op, const std::string& self, const std::string& other) {
  if (op.spelling[0] == '.') return fmt::format("{}{}({})", self, op.spelling, other);
  return fmt::format("{} {} {}", self, op.spelling, other);
}

inline Call update_call(std::string text, std::vector<int> inputs, std::function<Tensor(const Args&)> run, Expect e,
                        Numerics numerics = Numerics::Exact) {
  Call c = make_call(std::move(text), std::move(inputs), std::move(run), std::move(e), numerics);
  c.in_place = true;
  return c;
}

inline bool divides(const UpdateOp& op) { return op.family == Family::Floating; }

inline void gen_update_with_tensor(Program& p, int self, const UpdateOp& op) {
  const int other = operand_like(p, self);
  if (p.failed()) return;
  const auto fn = op.with_tensor;
  Call c = update_call(update_text(op, p.name(self), p.name(other)), {self, other},
                       [fn](const Args& x) { Tensor t = x[0]; return fn(t, x[1]); }, expect([&] {
                         return contract::in_place(p.meta(self), contract::binary(op.family, p.meta(self),
                                                                                  p.meta(other)));
                       }));
  c.amplifies = divides(op);
  p.apply(std::move(c));
}

inline void gen_update_with_number(Program& p, int self, const UpdateOp& op) {
  const NumberArg n = number_arg(p.rng());
  const auto fn = op.with_number;
  const Scalar s = n.scalar;
  p.apply(update_call(update_text(op, p.name(self), n.text), {self},
                      [fn, s](const Args& x) { Tensor t = x[0]; return fn(t, s); }, expect([&] {
                        return contract::in_place(p.meta(self), contract::binary_scalar(op.family, p.meta(self),
                                                                                        n.number));
                      })));
}

inline void gen_copy(Program& p, int self) {
  const int src = operand_like(p, self);
  if (p.failed()) return;
  const bool steps = is_floating(p.meta(src).dtype) && !is_floating(p.meta(self).dtype);
  p.apply(update_call(fmt::format("{}.copy_({})", p.name(self), p.name(src)), {self, src},
                      [](const Args& x) { Tensor t = x[0]; return t.copy_(x[1]); },
                      expect([&] { return contract::copy_into(p.meta(self), p.meta(src)); }),
                      steps ? Numerics::Steps : Numerics::Exact));
}

inline void gen_update(Program& p) {
  Rng& r = p.rng();
  const int self = p.pick();
  const int64_t roll = r.range(0, 99);
  const UpdateOp& op = kUpdateOps[r.range(0, std::size(kUpdateOps) - 1)];
  if (roll < 45) return gen_update_with_tensor(p, self, op);
  if (roll < 75) return gen_update_with_number(p, self, op);
  if (roll < 92) return gen_copy(p, self);
  p.apply(update_call(p.name(self) + ".zero_()", {self}, [](const Args& x) { Tensor t = x[0]; return t.zero_(); },
                      expect([&] { return p.meta(self); })));
}

/// Calls with an undefined Tensor() operand.
inline void gen_undefined(Program& p) {
  const int a = p.pick();
  struct Case {
    const char* text;
    Tensor (*run)(const Tensor& undefined, const Tensor& t);
  };
  static const Case kCases[] = {
      {"lazyjit::add(Tensor(), {})", [](const Tensor& u, const Tensor& t) { return add(u, t); }},
      {"lazyjit::where({0}, Tensor(), {0})", [](const Tensor& u, const Tensor& t) { return where(t, u, t); }},
      {"lazyjit::exp(Tensor()) + 0 * {}", [](const Tensor& u, const Tensor& t) { return exp(u) + 0 * t; }},
      {"lazyjit::sum(Tensor()) + 0 * {}", [](const Tensor& u, const Tensor& t) { return sum(u) + 0 * t; }},
      {"lazyjit::matmul({}, Tensor())", [](const Tensor& u, const Tensor& t) { return matmul(t, u); }},
      {"lazyjit::cat({{{}, Tensor()}}, 0)", [](const Tensor& u, const Tensor& t) { return cat({t, u}, 0); }},
      {"Tensor().to(DType::Float32) + 0 * {}", [](const Tensor& u, const Tensor& t) { return u.to(DType::Float32) + 0 * t; }},
      {"{}.copy_(Tensor())", [](const Tensor& u, const Tensor& t) { Tensor s = t; return s.copy_(u); }},
      {"{} += Tensor()", [](const Tensor& u, const Tensor& t) { Tensor s = t; return s += u; }},
      {"lazyjit::reshape(Tensor(), {{1}}) + 0 * {}", [](const Tensor& u, const Tensor& t) { return reshape(u, {1}) + 0 * t; }},
  };
  const Case& c = kCases[p.rng().range(0, std::size(kCases) - 1)];
  const auto run = c.run;
  p.apply(make_call(fmt::format(fmt::runtime(c.text), p.name(a)), {a},
                    [run](const Args& x) { return run(Tensor(), x[0]); },
                    Expect{Expect::Verdict::Invalid, {}, "an operand is undefined"}));
}

}  // namespace lazyjit::fuzz
