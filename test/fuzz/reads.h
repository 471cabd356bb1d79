// The fuzzer's reads: sync of some tensors, mark_step, item<T>, to_vector<T>, dump, and reads
// of tensors too large for any machine (which must throw Error, not abort).
#pragma once

#include <numeric>
#include <typeinfo>

#include "calls.h"

namespace lazyjit::fuzz {

inline void gen_sync(Program& p) {
  std::vector<int> slots;
  for (int64_t k = p.rng().range(1, 3); k > 0; --k) slots.push_back(p.pick());
  p.sync_slots(slots);
}

inline void gen_mark_step(Program& p) { p.mark_step_all(); }

/// Syncs every tensor in one graph and compares all of them: the end of every program.
inline void check_everything(Program& p) {
  std::vector<int> slots(static_cast<size_t>(p.size()));
  std::iota(slots.begin(), slots.end(), 0);
  p.sync_slots(slots);
}

/// dump() of the tensors of `slots`: text, never an error.
inline void dump_slots(Program& p, const std::vector<int>& slots, DumpFormat format) {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
  for (int s : slots) {
    tensors.push_back(p.entry(s).tensor);
    names.push_back(p.name(s));
  }
  const char* spelling = format == DumpFormat::LazyIr ? "LazyIr" : format == DumpFormat::LlvmIr ? "LlvmIr" : "Assembly";
  const std::string text = fmt::format("lazyjit::dump({{{}}}, DumpFormat::{})", fmt::join(names, ", "), spelling);
  try {
    const std::string out = dump(tensors, format);
    p.log(fmt::format("{};  // {} characters", text, out.size()));
    if (out.empty()) p.fail(text + " returned nothing");
  } catch (const std::exception& e) {
    p.log(text + ";");
    p.fail(fmt::format("{} threw {}: {}", text, type_name(e), e.what()));
  }
}

/// dump() of one or two tensors, mostly as lazy IR (the other forms compile).
inline void gen_dump(Program& p) {
  Rng& r = p.rng();
  std::vector<int> slots;
  for (int64_t k = r.range(1, 2); k > 0; --k) slots.push_back(p.pick());
  const DumpFormat format = r.chance(0.9) ? DumpFormat::LazyIr : r.pick({DumpFormat::LlvmIr, DumpFormat::Assembly});
  p.perform(slots, [format](Program& q, const std::vector<int>& s) { dump_slots(q, s, format); });
}

/// Element 0 of `t` as the Number that C++ code reading it would hold.
inline Number number_at(const ir::HostTensor& t) {
  switch (t.dtype) {
    case DType::Bool: return Number::boolean(element<bool>(t, 0));
    case DType::Int32: return Number::int64(element<int32_t>(t, 0));
    case DType::Int64: return Number::int64(element<int64_t>(t, 0));
    default: return Number::float64(t.as_double(0));
  }
}

/// What item<T>() returns for `n` ("converted to T as a C++ cast would").
template <class T>
T item_value(const Number& n) {
  if constexpr (std::is_same_v<T, bool>) return n.is_real() ? n.real != 0 : n.integer != 0;
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(n.is_real() ? n.real : static_cast<double>(n.integer));
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(n.is_real() ? static_cast<int64_t>(n.real) : static_cast<int64_t>(n.integer));
  }
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return a == b;
}

template <class T>
void read_item(Program& p, int slot) {
  const Entry& e = p.entry(slot);
  const std::string text = fmt::format("{}.item<{}>()", p.name(slot), cpp_type<T>());
  const Number n = e.ref.numel() == 1 ? number_at(e.ref) : Number{};
  Expect x = expect([&] {
    if (e.ref.numel() != 1) throw Reject{"item of a tensor that is not one element"};
    if (e.accuracy.trust != Trust::Exact) throw Open{};
    contract::check_fits(n, dtype_of_v<T>);
    return Meta{};
  });
  try {
    const T got = e.tensor.item<T>();
    p.log(fmt::format("{};  // {}", text, literal<T>(got)));
    if (x.verdict == Expect::Verdict::Invalid) return p.fail(text + " returned but must throw: " + x.why);
    if (x.verdict == Expect::Verdict::Valid && !same_value(got, item_value<T>(n))) {
      return p.fail(fmt::format("{} returned {}, expected {}", text, literal<T>(got), literal<T>(item_value<T>(n))));
    }
  } catch (const Error& err) {
    p.log(fmt::format("{};  // throws: {}", text, err.what()));
    if (x.verdict == Expect::Verdict::Valid) return p.fail(fmt::format("{} threw \"{}\" but is valid", text, err.what()));
  } catch (const std::exception& err) {
    p.log(text + ";");
    return p.fail(fmt::format("{} threw {}: {}", text, type_name(err), err.what()));
  }
  if (!e.tensor.impl()->pending()) p.check_materialised(slot);
}

template <class T>
void read_vector(Program& p, int slot) {
  const Entry& e = p.entry(slot);
  const std::string text = fmt::format("{}.to_vector<{}>()", p.name(slot), cpp_type<T>());
  try {
    const std::vector<T> got = e.tensor.to_vector<T>();
    p.log(fmt::format("{};  // {} elements", text, got.size()));
    if (e.ref.dtype != dtype_of_v<T>) return p.fail(text + " returned but the dtype differs: must throw");
  } catch (const Error& err) {
    p.log(fmt::format("{};  // throws: {}", text, err.what()));
    if (e.ref.dtype == dtype_of_v<T>) return p.fail(fmt::format("{} threw \"{}\" but is valid", text, err.what()));
  } catch (const std::exception& err) {
    p.log(text + ";");
    return p.fail(fmt::format("{} threw {}: {}", text, type_name(err), err.what()));
  }
  if (!e.tensor.impl()->pending()) p.check_materialised(slot);
}

inline void gen_item(Program& p) {
  Rng& r = p.rng();
  int slot = p.pick();
  for (int s = 0; s < p.size() && r.chance(0.8); ++s) {
    if (p.meta(s).shape.empty() || (p.entry(s).ref.numel() == 1 && r.chance(0.5))) slot = s;
  }
  const DType as = r.chance(0.5) ? p.meta(slot).dtype : random_dtype(r);
  p.perform({slot}, [as](Program& q, const std::vector<int>& s) {
    ir::dispatch_dtype(as, [&]<class T>(T) { read_item<T>(q, s[0]); });
  });
}

inline void gen_to_vector(Program& p) {
  Rng& r = p.rng();
  const int slot = p.pick();
  const DType as = r.chance(0.85) ? p.meta(slot).dtype : random_dtype(r);
  p.perform({slot}, [as](Program& q, const std::vector<int>& s) {
    ir::dispatch_dtype(as, [&]<class T>(T) { read_vector<T>(q, s[0]); });
  });
}

/// A tensor of 2^48 elements (traced fine), from a one-element slot or `full`, materialised
/// or read: must throw Error, before asking for the memory (AddressSanitizer aborts on such a
/// request).
inline void read_huge(Program& p, int slot, bool read) {
  const Dims huge = {int64_t{1} << 24, int64_t{1} << 24};
  const std::string source = slot >= 0 ? fmt::format("lazyjit::expand(lazyjit::reshape({}.to(DType::Float32), {{}}), {})",
                                                     p.name(slot), dims_text(huge))
                                       : fmt::format("lazyjit::full({}, 1.5)", dims_text(huge));
  const std::string text = read ? source + ".to_vector<float>()" : "lazyjit::sync({" + source + "})";
  try {
    Tensor t = slot >= 0 ? expand(reshape(p.entry(slot).tensor.to(DType::Float32), {}), huge) : lazyjit::full(huge, 1.5);
    if (read) t.to_vector<float>();
    else sync({t});
    p.log(text + ";  // returned");
    p.fail(text + " returned but cannot have the memory");
  } catch (const Error& e) {
    p.log(fmt::format("{};  // throws: {}", text, e.what()));
  } catch (const std::exception& e) {
    p.log(text + ";");
    p.fail(fmt::format("{} threw {}: {}", text, type_name(e), e.what()));
  }
}

inline void gen_huge(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const bool read = r.chance(0.5), from_pool = p.entry(a).ref.numel() == 1 && r.chance(0.5);
  if (!from_pool) return p.perform({}, [read](Program& q, const std::vector<int>&) { read_huge(q, -1, read); });
  p.perform({a}, [read](Program& q, const std::vector<int>& s) { read_huge(q, s[0], read); });
}

}  // namespace lazyjit::fuzz
