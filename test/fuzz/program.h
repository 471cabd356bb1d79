// One fuzz program: live tensors with their reference values, calls checked against the
// contract (oracle.h), materialised values against their references, and recorded steps.
#pragma once

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "oracle.h"
#include "reference.h"
#include "transcript.h"
#include "lazyjit/lazyjit.h"

namespace lazyjit::fuzz {

/// Tensors past this many elements are traced and checked but never kept or materialised.
inline constexpr int64_t kMaxKeptElements = 4096;
inline constexpr int kPoolSize = 12;

/// Whether a tensor of `m` is small enough to keep: few elements, even counting size-0 dims
/// as 1 (a new operand may take a huge dim from it).
inline bool small(const Meta& m) {
  int64_t n = 1;
  for (int64_t d : m.shape) {
    if (d > kMaxKeptElements) return false;
    n *= std::max<int64_t>(d, 1);
    if (n > kMaxKeptElements) return false;
  }
  return true;
}

/// The demangled type of an exception ("std::bad_alloc").
inline std::string type_name(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string text = status == 0 && name != nullptr ? name : typeid(e).name();
  std::free(name);
  return text;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t range(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  uint64_t bits() { return gen_(); }
  template <class T>
  T pick(std::initializer_list<T> items) {
    return items.begin()[range(0, static_cast<int64_t>(items.size()) - 1)];
  }

 private:
  std::mt19937_64 gen_;
};

/// How an op's rounding relates to the interpreter's. Exact: the same (views, selections,
/// IEEE arithmetic). Rounds: a float result may differ in the last bits. Steps: a small
/// change of a float operand can flip the result (comparisons, float to integer, argmax).
enum class Numerics { Exact, Rounds, Steps };

/// One traced call. `run` performs it on the given tensors (the pool's, or host copies of
/// them for the reference); `text` is its C++ spelling without the assignment.
struct Call {
  std::string text;
  std::vector<int> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> run;
  Expect expect;
  Numerics numerics = Numerics::Exact;
  bool in_place = false;   ///< updates the tensor of inputs[0] instead of making a new one
  bool amplifies = false;  ///< ill-conditioned somewhere (exp, log, pow, division): a Close
                           ///< operand's error may grow past any fixed tolerance
  double growth = 1;       ///< how many operand magnitudes one result element may add up
};

/// A pool slot: a tensor, the value it must have, and how exactly.
struct Entry {
  Tensor tensor;
  ir::HostTensor ref;
  Accuracy accuracy;
  std::string name;
  bool compared = false;  ///< the current value was compared once already
};

class Program;

/// A step of a program as recorded, replayable on the tensors it names: a call, a read, a
/// sync or a dropped handle. Replaying a subset of the steps minimises a failing program.
struct Step {
  std::vector<std::string> names;  ///< the tensors it reads
  std::function<void(Program&, const std::vector<int>&)> replay;  ///< on their slots
  bool any_subset = false;  ///< replays on those of its tensors that exist (a sync)
};

/// How many values a program compared, by Trust (Unknown ones are not compared).
struct Coverage {
  int values[3] = {0, 0, 0};
};

class Program {
 public:
  explicit Program(uint64_t seed) : seed_(seed), rng_(seed) {}

  uint64_t seed() const { return seed_; }
  Rng& rng() { return rng_; }
  int size() const { return static_cast<int>(pool_.size()); }
  const Entry& entry(int slot) const { return pool_[slot]; }
  Meta meta(int slot) const { return meta_of(pool_[slot].ref); }
  const std::string& name(int slot) const { return pool_[slot].name; }
  int pick() { return static_cast<int>(rng_.range(0, size() - 1)); }
  /// The largest magnitude slot `slot`'s value may reach (for a Close value, its scale).
  double magnitude(int slot) const {
    return std::max(pool_[slot].accuracy.scale, max_magnitude(pool_[slot].ref));
  }
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  const Coverage& coverage() const { return coverage_; }
  std::string listing() const;

  /// Runs, checks and (when it succeeds with a small result) keeps `call` under `name` (by
  /// default the next "tN"); returns the slot of the result, or -1.
  int apply(Call call, std::string name = "");
  /// Records a step that is not a call (a read, a sync) and performs it on `slots`.
  void perform(const std::vector<int>& slots, std::function<void(Program&, const std::vector<int>&)> action);
  /// The recorded steps, and the program made by replaying some of them.
  const std::vector<Step>& steps() const { return steps_; }
  static Program replay(uint64_t seed, const std::vector<Step>& steps);
  /// Records a line of the program (a materialisation, a dropped handle).
  void log(const std::string& line);
  /// Records the first failure of the program, with the op that caused it.
  void fail(const std::string& what);
  /// Compares materialised slot `slot` with its reference, then makes its value the new
  /// reference (both sides go on from the same data).
  void check_materialised(int slot);
  /// Drops random slots past the pool size. Between calls only: slots keep their index
  /// while a call is being made.
  void trim();
  /// Syncs the tensors of `slots` and every dropped pending one in one call, compares them
  /// and releases the dropped ones: a value leaves the program only once it was checked.
  void sync_slots(const std::vector<int>& slots);
  /// mark_step(), then compares every tensor (all are materialised after it).
  void mark_step_all();

 private:
  struct Outcome {
    enum class Kind { Returned, Error, Foreign };
    Kind kind = Kind::Returned;
    Tensor result;
    std::string error;  ///< the exception's message
  };
  Outcome invoke(const Call& call, const std::vector<Tensor>& inputs);
  static std::string outcome_text(const Outcome& out);
  void check_outcome(const Call& call, const Outcome& out);
  void keep(const Call& call, const Tensor& result, const std::string& name);
  Trust result_trust(const Call& call, const Meta& result) const;
  Accuracy result_accuracy(const Call& call, const ir::HostTensor& ref) const;

  /// Runs a materialising call that must succeed; reports what it threw.
  template <class F>
  bool materialise(const std::string& text, F&& f);
  void check_entry(Entry& e);
  void release_retired();
  void sync_now(const std::vector<int>& slots);
  void drop(int slot);
  int slot_of(const std::string& name) const;
  std::vector<std::string> names_of(const std::vector<int>& slots) const;

  uint64_t seed_;
  Rng rng_;
  std::vector<Entry> pool_;
  std::vector<Entry> retired_;  ///< dropped from the pool while pending: checked at the next sync
  std::vector<Step> steps_;
  bool replaying_ = false;
  std::vector<std::string> lines_;
  std::string failure_;
  int next_name_ = 0;
  Coverage coverage_;
};

template <class F>
bool Program::materialise(const std::string& text, F&& f) {
  try {
    f();
    return true;
  } catch (const Error& e) {
    fail(fmt::format("{} threw lazyjit::Error \"{}\"", text, e.what()));
  } catch (const std::exception& e) {
    fail(fmt::format("{} threw {}: {}", text, type_name(e), e.what()));
  }
  return false;
}

inline void Program::log(const std::string& line) {
  lines_.push_back(line);
  Transcript::get().append("  " + line + "\n");
}

inline std::string Program::listing() const {
  std::string text;
  for (const std::string& line : lines_) text += "  " + line + "\n";
  return text;
}

inline void Program::fail(const std::string& what) {
  if (failed()) return;
  failure_ = fmt::format("seed {:#x}: {}", seed_, what);
  log("// FAILS HERE: " + what);
}

inline Program::Outcome Program::invoke(const Call& call, const std::vector<Tensor>& inputs) {
  Outcome out;
  try {
    out.result = call.run(inputs);
  } catch (const Error& e) {
    out.kind = Outcome::Kind::Error;
    out.error = e.what();
  } catch (const std::exception& e) {
    out.kind = Outcome::Kind::Foreign;
    out.error = fmt::format("{}: {}", type_name(e), e.what());
  } catch (...) {
    out.kind = Outcome::Kind::Foreign;
    out.error = "an exception that is not a std::exception";
  }
  return out;
}

inline std::string Program::outcome_text(const Outcome& out) {
  switch (out.kind) {
    case Outcome::Kind::Returned: return meta_text(meta_of(out.result));
    case Outcome::Kind::Error: return "throws: " + out.error;
    case Outcome::Kind::Foreign: return "throws a foreign exception: " + out.error;
  }
  return "";
}

inline void Program::check_outcome(const Call& call, const Outcome& out) {
  const Expect& e = call.expect;
  const bool threw = out.kind == Outcome::Kind::Error;
  if (out.kind == Outcome::Kind::Foreign) {
    fail(fmt::format("{} threw {} instead of lazyjit::Error", call.text, out.error));
  } else if (threw && e.verdict == Expect::Verdict::Valid) {
    fail(fmt::format("{} threw lazyjit::Error \"{}\" but is valid (expected {})", call.text, out.error,
                     meta_text(e.meta)));
  } else if (!threw && e.verdict == Expect::Verdict::Invalid) {
    fail(fmt::format("{} returned {} but must throw lazyjit::Error ({})", call.text, out.result.to_string(), e.why));
  } else if (!threw && e.verdict == Expect::Verdict::Valid && meta_of(out.result) != e.meta) {
    fail(fmt::format("{} returned {}, expected {}", call.text, meta_text(meta_of(out.result)), meta_text(e.meta)));
  } else if (threw && out.error.empty()) {
    fail(fmt::format("{} threw lazyjit::Error with an empty message", call.text));
  }
}

inline int Program::apply(Call call, std::string name) {
  const bool fresh_name = name.empty() && !call.in_place;
  if (call.in_place) name = pool_[call.inputs[0]].name;
  if (fresh_name) name = fmt::format("t{}", next_name_);
  if (!replaying_) {
    steps_.push_back({names_of(call.inputs), [call, name](Program& p, const std::vector<int>& slots) {
                        Call c = call;
                        c.inputs = slots;
                        const std::string given = c.in_place ? "" : name;
                        p.apply(std::move(c), given);
                      }});
  }
  std::vector<Tensor> inputs;
  for (int slot : call.inputs) inputs.push_back(pool_[slot].tensor);
  const Outcome out = invoke(call, inputs);
  const bool returned = out.kind == Outcome::Kind::Returned;
  const bool named = returned && !call.in_place;
  log(fmt::format("{}{};  // {}", named ? fmt::format("Tensor {} = ", name) : "", call.text, outcome_text(out)));
  check_outcome(call, out);
  if (failed() || !returned) return -1;
  if (call.in_place && !out.result.is_same(inputs[0])) fail(call.text + " returned another tensor");
  if (named && fresh_name) ++next_name_;
  if (failed() || !small(meta_of(out.result))) return -1;
  keep(call, out.result, name);
  return call.in_place ? call.inputs[0] : size() - 1;
}

inline void Program::perform(const std::vector<int>& slots,
                             std::function<void(Program&, const std::vector<int>&)> action) {
  if (!replaying_) steps_.push_back({names_of(slots), action});
  action(*this, slots);
}

inline int Program::slot_of(const std::string& name) const {
  for (int s = 0; s < size(); ++s) {
    if (pool_[s].name == name) return s;
  }
  return -1;
}

inline std::vector<std::string> Program::names_of(const std::vector<int>& slots) const {
  std::vector<std::string> names;
  for (int s : slots) names.push_back(pool_[s].name);
  return names;
}

inline Program Program::replay(uint64_t seed, const std::vector<Step>& steps) {
  Program p(seed);
  p.replaying_ = true;
  Transcript::get().begin(fmt::format("replay of seed {:#x}:\n", seed));
  for (const Step& step : steps) {
    std::vector<int> slots;
    for (const std::string& name : step.names) slots.push_back(p.slot_of(name));
    if (step.any_subset) slots.erase(std::remove(slots.begin(), slots.end(), -1), slots.end());
    if (std::find(slots.begin(), slots.end(), -1) != slots.end()) continue;
    step.replay(p, slots);
    if (p.failed()) break;
  }
  Transcript::get().end();
  return p;
}

inline void Program::keep(const Call& call, const Tensor& result, const std::string& name) {
  std::vector<Tensor> copies;
  for (int slot : call.inputs) copies.push_back(tensor_of(pool_[slot].ref));
  ir::HostTensor ref;
  try {
    ref = interpret(call.run(copies));
  } catch (const std::exception& e) {
    return fail(fmt::format("{} on host copies of its inputs threw \"{}\"", call.text, e.what()));
  }
  if (meta_of(ref) != meta_of(result)) {
    return fail(fmt::format("{} gave {} but {} on host copies", call.text, meta_text(meta_of(result)),
                            meta_text(meta_of(ref))));
  }
  const Accuracy accuracy = result_accuracy(call, ref);
  Entry entry{result, std::move(ref), accuracy, name};
  if (call.in_place) {
    pool_[call.inputs[0]] = std::move(entry);
  } else {
    pool_.push_back(std::move(entry));
  }
}

inline void Program::trim() {
  if (size() <= kPoolSize) return;
  while (size() > kPoolSize - 3) drop(pick());
}

/// Drops a slot. A pending tensor stays alive, retired, until the next sync compares it.
inline void Program::drop(int slot) {
  if (!replaying_) {
    steps_.push_back({{pool_[slot].name}, [](Program& p, const std::vector<int>& slots) { p.drop(slots[0]); }});
  }
  if (pool_[slot].tensor.impl()->pending()) {
    retired_.push_back(std::move(pool_[slot]));
  } else {
    log(fmt::format("{} = Tensor();  // dropped", pool_[slot].name));
  }
  pool_.erase(pool_.begin() + slot);
}

inline void Program::release_retired() {
  for (Entry& e : retired_) {
    if (failed()) return;
    check_entry(e);
    log(fmt::format("{} = Tensor();  // dropped", e.name));
  }
  retired_.clear();
}

inline void Program::sync_slots(const std::vector<int>& slots) {
  if (!replaying_) steps_.push_back({names_of(slots), [](Program& p, const std::vector<int>& on) { p.sync_now(on); }, true});
  sync_now(slots);
}

inline void Program::sync_now(const std::vector<int>& slots) {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
  for (int s : slots) {
    tensors.push_back(pool_[s].tensor);
    names.push_back(pool_[s].name);
  }
  for (const Entry& e : retired_) {
    tensors.push_back(e.tensor);
    names.push_back(e.name);
  }
  const std::string text = fmt::format("lazyjit::sync({{{}}})", fmt::join(names, ", "));
  log(text + ";");
  if (!materialise(text, [&] { sync(tensors); })) return;
  for (int s : slots) check_entry(pool_[s]);
  release_retired();
}

inline void Program::mark_step_all() {
  perform({}, [](Program& p, const std::vector<int>&) {
    p.log("lazyjit::mark_step();");
    if (!p.materialise("lazyjit::mark_step()", [] { mark_step(); })) return;
    for (Entry& e : p.pool_) {
      if (!p.failed()) p.check_entry(e);
    }
    p.release_retired();
  });
}

inline Trust Program::result_trust(const Call& call, const Meta& result) const {
  Trust trust = Trust::Exact;
  bool close_float = false;
  for (int slot : call.inputs) {
    const Entry& e = pool_[slot];
    trust = std::max(trust, e.accuracy.trust);
    close_float = close_float || (e.accuracy.trust == Trust::Close && is_floating(e.ref.dtype));
  }
  if (close_float && (call.numerics == Numerics::Steps || call.amplifies || !is_floating(result.dtype))) {
    return Trust::Unknown;
  }
  if (call.numerics == Numerics::Rounds && is_floating(result.dtype)) trust = std::max(trust, Trust::Close);
  return trust;
}

/// A Close result's rounding errors scale with its operands' magnitudes (times `growth`) and
/// its own, and are relative to the least precise float among them. Past 1e30 (float32) or
/// 1e300 (float64) an overflow may land either way: Unknown.
inline Accuracy Program::result_accuracy(const Call& call, const ir::HostTensor& ref) const {
  Accuracy a{result_trust(call, meta_of(ref)), 0, 0};
  if (a.trust != Trust::Close) return a;
  double in = 0;
  a.rtol = close_rtol(ref.dtype);
  for (int slot : call.inputs) {
    const Entry& e = pool_[slot];
    in = std::max(in, magnitude(slot));
    if (e.accuracy.trust == Trust::Close) a.rtol = std::max(a.rtol, e.accuracy.rtol);
    if (is_floating(e.ref.dtype)) a.rtol = std::max(a.rtol, close_rtol(e.ref.dtype));
  }
  a.scale = std::max(in * call.growth, max_magnitude(ref));
  if (a.scale > (ref.dtype == DType::Float32 ? 1e30 : 1e300)) a.trust = Trust::Unknown;
  return a;
}

inline void Program::check_materialised(int slot) { check_entry(pool_[slot]); }

inline void Program::check_entry(Entry& e) {
  if (e.tensor.impl()->pending()) return fail(fmt::format("{} is still pending after materialisation", e.name));
  ir::HostTensor got;
  try {
    got = read_back(e.tensor);
  } catch (const std::exception& ex) {
    return fail(fmt::format("reading materialised {} threw \"{}\"", e.name, ex.what()));
  }
  if (!e.compared) ++coverage_.values[static_cast<int>(e.accuracy.trust)];
  if (e.accuracy.trust != Trust::Unknown) {
    const std::string diff = mismatches(got, e.ref, e.accuracy);
    if (!diff.empty()) return fail(fmt::format("{} ({}) differs from its reference: {}", e.name,
                                               meta_text(meta_of(got)), diff));
  }
  e.ref = std::move(got);
  e.accuracy = Accuracy{};
  e.compared = true;
}

}  // namespace lazyjit::fuzz
