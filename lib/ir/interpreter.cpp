// Reference interpreter: one element at a time, with the semantics of scalar_semantics.h.
#include "ir/interpreter.h"

#include <cstring>

#include "fmt/format.h"
#include "ir/collectives.h"
#include "ir/dtype_dispatch.h"
#include "ir/philox.h"
#include "ir/scalar_semantics.h"
#include "ir/structured.h"
#include "lazyjit/error.h"

namespace lazyjit::ir {
namespace {

template <class T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <class T>
T get(const HostTensor& t, int64_t i) {
  Storage<T> v;
  std::memcpy(&v, t.bytes.data() + i * sizeof(v), sizeof(v));
  return static_cast<T>(v);
}

template <class T>
void set(HostTensor& t, int64_t i, T value) {
  Storage<T> v = static_cast<Storage<T>>(value);
  std::memcpy(t.bytes.data() + i * sizeof(v), &v, sizeof(v));
}

HostTensor make_host(DType dtype, const Shape& shape) {
  HostTensor t{dtype, shape, {}};
  t.bytes.resize(static_cast<size_t>(numel(shape) * dtype_size(dtype)));
  return t;
}

/// Row-major strides of `operand` read at the indices of `out`, with 0 for broadcast dims.
std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = operand.size(); k-- > 0;) {
    const size_t d = k + out.size() - operand.size();
    strides[d] = operand[k] == 1 ? 0 : stride;
    stride *= operand[k];
  }
  return strides;
}

/// Calls f(out_index, operand_indices) for every element of `out` in row-major order.
template <class F>
void for_each_index(const Shape& out, const std::vector<std::vector<int64_t>>& strides, F&& f) {
  const int64_t n = numel(out);
  std::vector<int64_t> index(out.size(), 0);
  std::vector<int64_t> offsets(strides.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, offsets);
    for (size_t d = out.size(); d-- > 0;) {  // odometer increment
      ++index[d];
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] += strides[k][d];
      if (index[d] < out[d]) break;
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] -= strides[k][d] * index[d];
      index[d] = 0;
    }
  }
}

HostTensor eval_leaf(const Node& node) {
  HostTensor out = make_host(node.dtype(), node.shape());
  const int64_t n = out.numel();
  switch (node.op()) {
    case OpKind::Parameter:
      if (n > 0) std::memcpy(out.bytes.data(), node.data()->data(), out.bytes.size());
      break;
    case OpKind::Scalar:
    case OpKind::Constant:
      dispatch_dtype(node.dtype(), [&]<class T>(T) {
        const T v = is_floating(node.dtype()) ? static_cast<T>(node.scalar().f)
                                              : semantics::convert<T>(node.scalar().i);
        for (int64_t i = 0; i < n; ++i) set<T>(out, i, v);
      });
      break;
    case OpKind::Arange:
      dispatch_dtype(node.dtype(), [&]<class T>(T) {
        for (int64_t i = 0; i < n; ++i) set<T>(out, i, static_cast<T>(i));
      });
      break;
    case OpKind::Rand:
    case OpKind::Randn:
      dispatch_floating(node.dtype(), [&]<class T>(T) {
        const auto seed = static_cast<uint64_t>(node.scalar().i);
        for (int64_t i = 0; i < n; ++i) {
          const philox::Block block = philox::generate(seed, static_cast<uint64_t>(i));
          set<T>(out, i, node.op() == OpKind::Rand ? philox::uniform<T>(block) : philox::normal<T>(block));
        }
      });
      break;
    default: break;
  }
  return out;
}

HostTensor eval_elementwise(const Node& node, const std::vector<const HostTensor*>& args) {
  HostTensor out = make_host(node.dtype(), node.shape());
  std::vector<std::vector<int64_t>> strides;
  for (const HostTensor* a : args) strides.push_back(broadcast_strides(a->shape, node.shape()));
  const OpKind op = node.op();
  const DType in = args[0]->dtype;
  const DTypeRule rule = op_info(op).dtype_rule;

  if (rule == DTypeRule::Cast) {
    dispatch_dtype(in, [&]<class From>(From) {
      dispatch_dtype(node.dtype(), [&]<class To>(To) {
        for_each_index(node.shape(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
          set<To>(out, i, semantics::convert<To>(get<From>(*args[0], off[0])));
        });
      });
    });
  } else if (rule == DTypeRule::Compare) {
    dispatch_dtype(in, [&]<class T>(T) {
      for_each_index(node.shape(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
        set<bool>(out, i, semantics::apply_compare(op, get<T>(*args[0], off[0]), get<T>(*args[1], off[1])));
      });
    });
  } else if (rule == DTypeRule::Select) {
    dispatch_dtype(node.dtype(), [&]<class T>(T) {
      for_each_index(node.shape(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
        set<T>(out, i, get<bool>(*args[0], off[0]) ? get<T>(*args[1], off[1]) : get<T>(*args[2], off[2]));
      });
    });
  } else {
    dispatch_dtype(node.dtype(), [&]<class T>(T) {
      for_each_index(node.shape(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
        T x[3] = {};
        for (size_t k = 0; k < args.size(); ++k) x[k] = get<T>(*args[k], off[k]);
        if constexpr (std::is_integral_v<T>) {
          if (divides(op) && x[1] == 0) throw Error(division_error(op));
        }
        set<T>(out, i, semantics::apply_same<T>(op, x));
      });
    });
  }
  return out;
}

/// The row-major multi-index of element `i` of `shape`.
std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  return index;
}

/// The linear index of `index` in `shape`; dims of size 1 in `shape` read index 0
/// (broadcasting, right-aligned when `index` has more dims).
int64_t ravel(std::span<const int64_t> index, const Shape& shape) {
  int64_t linear = 0;
  const size_t offset = index.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) linear = linear * shape[d] + (shape[d] == 1 ? 0 : index[d + offset]);
  return linear;
}

/// Folds: input elements in row-major order, each folded into its output element (so every
/// output sees its inputs in increasing index order) by the row's LAZYJIT_FOLD rule; argmax
/// by its own. Float sums are accumulated in double and rounded once.
HostTensor eval_reduce(const Node& node, const HostTensor& in) {
  HostTensor out = make_host(node.dtype(), node.shape());
  const int64_t n = in.numel(), m = out.numel();
  if (node.op() == OpKind::Argmax) {
    const int64_t dim = node.attrs()[0];
    dispatch_dtype(in.dtype, [&]<class T>(T) {
      std::vector<T> best(m);
      std::vector<int64_t> where(m, -1);
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<int64_t> index = unravel(i, in.shape);
        const int64_t o = ravel(index, node.shape());
        const T v = get<T>(in, i);
        if (where[o] < 0 || semantics::argmax_prefers<T>(v, static_cast<T>(best[o]))) {
          best[o] = v;
          where[o] = index[dim];
        }
      }
      for (int64_t o = 0; o < m; ++o) set<int64_t>(out, o, where[o]);
    });
    return out;
  }
  const std::optional<FoldInfo> fold = fold_info(node.op());
  if (!fold.has_value()) throw Error(fmt::format("the interpreter has no rule for the fold {}", op_name(node.op())));
  dispatch_dtype(in.dtype, [&]<class T>(T) {
    dispatch_dtype(node.dtype(), [&]<class R>(R) {
      auto fold_in = [&]<class Acc>(Acc) {
        std::vector<Acc> acc(m, semantics::fold_start<Acc>(fold->start));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t o = ravel(unravel(i, in.shape), node.shape());
          const Acc x[3] = {acc[o], static_cast<Acc>(static_cast<R>(get<T>(in, i))), Acc{}};
          acc[o] = semantics::apply_same<Acc>(fold->combine, x);
        }
        for (int64_t o = 0; o < m; ++o) set<R>(out, o, static_cast<R>(acc[o]));
      };
      // The exact reference: a float sum accumulates in double and rounds once. Every other
      // fold combines in the result dtype, as the kernels do.
      if constexpr (std::is_floating_point_v<R>) {
        if (fold->combine == OpKind::Add) return fold_in(double{});
      }
      fold_in(R{});
    });
  });
  return out;
}

/// Scans: along the dim, each element the running combine of its prefix by the row's
/// LAZYJIT_SCAN rule, in index order. Float32 accumulates in float64 (as the kernels do).
HostTensor eval_scan(const Node& node, const HostTensor& in) {
  HostTensor out = make_host(node.dtype(), node.shape());
  const FoldInfo scan = *scan_info(node.op());
  const int64_t dim = node.attrs()[0];
  const int64_t size = in.shape[dim];
  int64_t inner = 1;
  for (size_t d = dim + 1; d < in.shape.size(); ++d) inner *= in.shape[d];
  const int64_t outer = size == 0 || inner == 0 ? 0 : in.numel() / (size * inner);
  dispatch_dtype(in.dtype, [&]<class T>(T) {
    dispatch_dtype(node.dtype(), [&]<class R>(R) {
      using Acc = std::conditional_t<std::is_floating_point_v<R>, double, R>;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          Acc acc = semantics::fold_start<Acc>(scan.start);
          for (int64_t i = 0; i < size; ++i) {
            const int64_t at = (o * size + i) * inner + j;
            const Acc x[3] = {acc, static_cast<Acc>(static_cast<R>(get<T>(in, at))), Acc{}};
            acc = semantics::apply_same<Acc>(scan.combine, x);
            set<R>(out, at, static_cast<R>(acc));
          }
        }
      }
    });
  });
  return out;
}

/// Scatters: a copy of the input, then src's elements in row-major order, each added at (or
/// replacing) the element its index names.
HostTensor eval_scatter(const Node& node, const HostTensor& in, const HostTensor& indices, const HostTensor& src) {
  HostTensor out = in;
  const int64_t dim = node.attrs()[0];
  const bool accumulate = node.attrs()[1] == 1;
  const bool per_element = node.op() == OpKind::Scatter;  // else one index per position along dim
  const Shape& walk = per_element ? indices.shape : src.shape;
  const int64_t n = numel(walk);
  dispatch_dtype(node.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> index = unravel(i, walk);
      const int64_t k = per_element ? i : index[dim];
      const int64_t at = indices.dtype == DType::Int32 ? get<int32_t>(indices, k) : get<int64_t>(indices, k);
      if (at < 0 || at >= in.shape[dim]) throw Error(index_error(node.op(), node.attrs(), at, in.shape[dim]));
      const T value = get<T>(src, ravel(index, src.shape));
      index[dim] = at;
      const int64_t o = ravel(index, in.shape);
      const T x[3] = {get<T>(out, o), value, T{}};
      set<T>(out, o, accumulate ? semantics::apply_same<T>(OpKind::Add, x) : value);
    }
  });
  return out;
}

/// Index arithmetic on numbers, for the index maps of ir/structured.cpp.
class Numbers final : public IndexArith {
 public:
  explicit Numbers(const Shape& operand) : operand_(operand) {}
  Value constant(int64_t c) override { return c; }
  Value add(Value a, Value b) override { return a + b; }
  Value sub(Value a, Value b) override { return a - b; }
  Value mul(Value a, Value b) override { return a * b; }
  Value operand_size(int d) override { return operand_[d]; }

 private:
  const Shape& operand_;
};

/// The operand element that element `index` of a sliding-window view reads, or -1 for a
/// zero (padding, or no window position reaches it).
int64_t window_source(const Node& node, std::span<const int64_t> index, const Shape& in) {
  const Window w = Window::of(node.attrs());
  const int64_t kk = w.kh * w.kw;
  if (node.op() == OpKind::Unfold) {  // [n, g, (c, i, j), oh, ow] of [N, C, H, W]
    const int64_t per_group = in[1] / w.groups;
    const int64_t c = index[1] * per_group + index[2] / kk, i = index[2] % kk / w.kw, j = index[2] % w.kw;
    const int64_t h = index[3] * w.sh - w.ph + i * w.dh, x = index[4] * w.sw - w.pw + j * w.dw;
    if (h < 0 || h >= in[2] || x < 0 || x >= in[3]) return -1;
    return ((index[0] * in[1] + c) * in[2] + h) * in[3] + x;
  }
  // unfold_transpose: [n, c, (i, j), h, w] of [N, groups, C/groups * kk, OH, OW]
  const Shape& out = node.shape();
  const int64_t i = index[2] / w.kw, j = index[2] % w.kw;
  const int64_t th = index[3] + w.ph - i * w.dh, tw = index[4] + w.pw - j * w.dw;
  const int64_t oh_count = in[3], ow_count = in[4];
  if (th < 0 || tw < 0 || th % w.sh != 0 || tw % w.sw != 0 || th / w.sh >= oh_count || tw / w.sw >= ow_count) return -1;
  const int64_t per_group = out[1] / w.groups;
  const int64_t q = index[1] % per_group * kk + index[2];
  return (((index[0] * in[1] + index[1] / per_group) * in[2] + q) * in[3] + th / w.sh) * in[4] + tw / w.sw;
}

/// Views: each output element copies one operand element.
HostTensor eval_view(const Node& node, const std::vector<const HostTensor*>& args) {
  HostTensor out = make_host(node.dtype(), node.shape());
  Numbers numbers(args[0]->shape);
  std::vector<int64_t> in_index;
  const size_t size = dtype_size(node.dtype());
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> index = unravel(i, node.shape());
    const HostTensor* source = args[0];
    if (node.op() == OpKind::Unfold || node.op() == OpKind::UnfoldTranspose) {
      const int64_t from = window_source(node, index, source->shape);
      if (from >= 0) std::memcpy(out.bytes.data() + i * size, source->bytes.data() + from * size, size);
      continue;  // else the zero make_host left
    }
    if (node.op() == OpKind::OneHot) {  // computed, not copied
      const int64_t classes = node.shape().back(), k = index.back();
      index.pop_back();
      const int64_t at = source->dtype == DType::Int32 ? get<int32_t>(*source, ravel(index, source->shape))
                                                       : get<int64_t>(*source, ravel(index, source->shape));
      if (at < 0 || at >= classes) throw Error(index_error(node.op(), node.attrs(), at, classes));
      const int64_t hit = at == k ? 1 : 0;
      std::memcpy(out.bytes.data() + i * size, &hit, size);
      continue;
    }
    int64_t from = i;
    switch (node.op()) {
      case OpKind::Reshape: break;
      case OpKind::IndexSelect:
      case OpKind::Gather: {  // the index of element i: i of b's shape (gather), or its dims
        const int64_t dim = node.attrs()[0];  // [dim, dim + b's rank) (index_select)
        const HostTensor& indices = *args[1];
        const int64_t span = node.op() == OpKind::Gather ? 1 : static_cast<int64_t>(indices.shape.size());
        const int64_t k = node.op() == OpKind::Gather
                              ? i
                              : ravel(std::span(index).subspan(dim, span), indices.shape);
        const int64_t at = indices.dtype == DType::Int32 ? get<int32_t>(indices, k) : get<int64_t>(indices, k);
        if (at < 0 || at >= source->shape[dim]) throw Error(index_error(node.op(), node.attrs(), at, source->shape[dim]));
        index.erase(index.begin() + dim, index.begin() + dim + span);
        index.insert(index.begin() + dim, at);
        from = ravel(index, source->shape);
        break;
      }
      case OpKind::Cat: {
        const int64_t dim = node.attrs()[0];
        size_t k = 0;
        while (index[dim] >= args[k]->shape[dim]) index[dim] -= args[k++]->shape[dim];
        source = args[k];
        from = ravel(index, source->shape);
        break;
      }
      default:  // index arithmetic alone, shared with the lowering
        if (!operand_index(node, numbers, index, in_index)) {
          throw Error(fmt::format("the interpreter has no rule for the view {}", op_name(node.op())));
        }
        from = ravel(in_index, source->shape);
        break;
    }
    std::memcpy(out.bytes.data() + i * size, source->bytes.data() + from * size, size);
  }
  return out;
}

/// [..., M, K] @ [..., K, N] with broadcast batch dims; float products accumulate in double.
HostTensor eval_matmul(const Node& node, const HostTensor& a, const HostTensor& b) {
  HostTensor out = make_host(node.dtype(), node.shape());
  const size_t rank = node.shape().size();
  const int64_t rows = node.shape()[rank - 2], cols = node.shape()[rank - 1], inner = a.shape[a.shape.size() - 1];
  const Shape batch(node.shape().begin(), node.shape().end() - 2);
  const Shape a_batch(a.shape.begin(), a.shape.end() - 2), b_batch(b.shape.begin(), b.shape.end() - 2);
  dispatch_dtype(node.dtype(), [&]<class T>(T) {
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    for (int64_t p = 0; p < numel(batch); ++p) {
      const std::vector<int64_t> index = unravel(p, batch);
      const int64_t a0 = ravel(index, a_batch) * rows * inner, b0 = ravel(index, b_batch) * inner * cols;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          Acc acc{0};
          for (int64_t k = 0; k < inner; ++k) {
            acc += static_cast<Acc>(get<T>(a, a0 + i * inner + k)) * static_cast<Acc>(get<T>(b, b0 + k * cols + j));
          }
          set<T>(out, (p * rows + i) * cols + j, static_cast<T>(acc));
        }
      }
    }
  });
  return out;
}

/// A collective, carried out by the registered backend (ir/collectives.h) over host memory.
HostTensor eval_collective(const Node& node, const HostTensor& in) {
  HostTensor out{node.dtype(), node.shape(), std::vector<uint8_t>(static_cast<size_t>(numel(node.shape()) * dtype_size(node.dtype())))};
  run_collective({.node = &node, .in = in.bytes.data(), .in_count = in.numel(), .out = out.bytes.data(), .out_count = out.numel()});
  return out;
}

}  // namespace

double HostTensor::as_double(int64_t i) const {
  return dispatch_dtype(dtype, [&]<class T>(T) { return static_cast<double>(get<T>(*this, i)); });
}

std::vector<HostTensor> interpret(const Graph& graph) {
  std::vector<HostTensor> values(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = *graph.nodes[i];
    if (op_info(node.op()).access == AccessPattern::Leaf) {
      values[i] = eval_leaf(node);
      continue;
    }
    std::vector<const HostTensor*> args;
    for (int operand : graph.operands[i]) args.push_back(&values[operand]);
    switch (op_info(node.op()).access) {
      case AccessPattern::Fold: values[i] = eval_reduce(node, *args[0]); break;
      case AccessPattern::IndexMap: values[i] = eval_view(node, args); break;
      case AccessPattern::Matmul: values[i] = eval_matmul(node, *args[0], *args[1]); break;
      case AccessPattern::Scan: values[i] = eval_scan(node, *args[0]); break;
      case AccessPattern::Scatter: values[i] = eval_scatter(node, *args[0], *args[1], *args[2]); break;
      case AccessPattern::Collective: values[i] = eval_collective(node, *args[0]); break;
      default: values[i] = eval_elementwise(node, args); break;
    }
  }
  std::vector<HostTensor> results;
  for (int root : graph.roots) results.push_back(values[root]);
  return results;
}

}  // namespace lazyjit::ir
