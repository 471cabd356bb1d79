// Reference interpreter: one element at a time, with the semantics of scalar_semantics.h.
#include "ir/interpreter.h"

#include <cstring>

#include "ir/dtype_dispatch.h"
#include "ir/scalar_semantics.h"

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
        set<T>(out, i, semantics::apply_same<T>(op, x));
      });
    });
  }
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
    if (op_info(node.op()).kind == LoweringKind::Leaf) {
      values[i] = eval_leaf(node);
      continue;
    }
    std::vector<const HostTensor*> args;
    for (int operand : graph.operands[i]) args.push_back(&values[operand]);
    values[i] = eval_elementwise(node, args);
  }
  std::vector<HostTensor> results;
  for (int root : graph.roots) results.push_back(values[root]);
  return results;
}

}  // namespace lazyjit::ir
