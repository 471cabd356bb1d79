// The programs the GPU target is checked on, with a GPU and without: nvptx_test runs the GPU's
// kernel bodies on the CPU, cuda_test runs their PTX on a GPU; both compare with the
// reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/interpreter.h"
#include "lazyjit/lazyjit.h"
#include "runtime/tensor_impl.h"

namespace lazyjit::gpu_test {

/// Tensors to compute, pending: their graph is what a GPU runs.
struct GpuProgram {
  std::string name;
  std::vector<Tensor> results;
  double rtol = 4e-6;  ///< float32; float64 is held to rtol * 1e-7
};

inline ir::Graph graph_of(const std::vector<Tensor>& tensors) {
  std::vector<ir::NodePtr> roots;
  for (const Tensor& t : tensors) roots.push_back(t.impl()->ir_value());
  return ir::build_graph(roots);
}

/// A tensor of `shape` with values uniform in [lo, hi), from `seed`.
template <class T>
Tensor values(std::vector<int64_t> shape, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(lo, hi);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<T> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<T>(uniform(rng)));
  return Tensor::from_vector(v, std::move(shape));
}

/// Every kind of kernel: elementwise math in both float dtypes, rows with folds, column
/// folds, scans, products (packed, batched, with an epilogue), convolutions (the window read
/// in place as B and, in the weight gradient, as A), pooling, gathers and scatters.
inline std::vector<GpuProgram> gpu_programs() {
  std::vector<GpuProgram> programs;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = dtype == DType::Float32 ? values<float>({7, 150}, -6, 6, 1) : values<double>({7, 150}, -6, 6, 1);
    const Tensor p = abs(x) + 0.25;
    programs.push_back({std::string("math ") + std::string(dtype_name(dtype)),
                        {exp(x), log(p), tanh(x), gelu(x), erf(x), sin(x * 40.0), cos(x), pow(p, x), remainder(x, 0.7),
                         expm1(x), log1p(p), sigmoid(x), sqrt(p), x / p}});
  }
  const Tensor x = values<float>({13, 37}, -3, 3, 2);
  programs.push_back(
      {"folds", {softmax(x, -1), layer_norm(x, 1), sum(x, {0}), amax(x, {1}), cumsum(x, 1), mean(x, {}, false)}});
  const Tensor a = values<float>({37, 45}, -1, 1, 3), b = values<float>({45, 29}, -1, 1, 4);
  const Tensor bias = values<float>({29}, -1, 1, 5);
  const Tensor a3 = values<double>({3, 17, 9}, -1, 1, 6), b3 = values<double>({3, 9, 11}, -1, 1, 7);
  programs.push_back({"matmul", {matmul(a, b), relu(matmul(a, b) + bias), matmul(a3, b3)}});
  const Tensor image = values<float>({2, 3, 9, 9}, -1, 1, 8), w = values<float>({4, 3, 3, 3}, -1, 1, 9);
  const Tensor same = conv2d(image, w, Tensor(), 1, 1);  // the window read in place as B
  const Tensor strided = conv2d(image, w, Tensor(), 2, 1);  // packed
  const std::vector<Tensor> g = grad(sum(same * same, {}, false), {image, w});  // the window in place as A
  programs.push_back({"conv2d", {same, strided, max_pool2d(image, 2), g[0], g[1]}, 2e-5});
  const Tensor table = values<float>({11, 6}, -1, 1, 10);
  const Tensor index = Tensor::from_vector<int64_t>({3, 0, 10, 7, 7, 1}, {6});
  std::vector<int64_t> columns;
  for (int64_t i = 0; i < 66; ++i) columns.push_back((i * 7 + i / 6) % 6);
  const Tensor rows = Tensor::from_vector(columns, {11, 6});
  programs.push_back({"indexing",
                      {index_select(table, 0, index), embedding(table, index), gather(table, 1, rows),
                       scatter_add(table, 1, rows, table)}});
  return programs;
}

/// index_select with an index past the table: its kernel's check fails.
inline Tensor out_of_range_program() {
  return index_select(values<float>({5, 4}, -1, 1, 11), 0, Tensor::from_vector<int64_t>({1, 9}, {2}));
}

/// Each result of `got` (per root of `graph`) equals the interpreter's: integers and bools
/// exactly, floats within `rtol` of the element or of the result's largest element (sums
/// in another order).
inline void expect_matches_interpreter(const ir::Graph& graph, const std::vector<ir::HostTensor>& got, double rtol,
                                       const std::string& context) {
  const std::vector<ir::HostTensor> expected = ir::interpret(graph);
  ASSERT_EQ(got.size(), expected.size()) << context;
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].bytes.size(), expected[r].bytes.size()) << context << " result " << r;
    double scale = 0;
    for (int64_t i = 0; i < expected[r].numel(); ++i) scale = std::max(scale, std::abs(expected[r].as_double(i)));
    const bool exact = !is_floating(expected[r].dtype);
    const double tolerance = expected[r].dtype == DType::Float64 ? rtol * 1e-7 : rtol;
    int reported = 0;
    for (int64_t i = 0; i < expected[r].numel() && reported < 5; ++i) {
      const double a = got[r].as_double(i), e = expected[r].as_double(i);
      const bool same = (std::isnan(a) && std::isnan(e)) || a == e ||
                        (!exact && std::abs(a - e) <= tolerance * (std::abs(e) + scale));
      if (!same) {
        ADD_FAILURE() << context << " result " << r << " element " << i << ": GPU " << a << ", interpreter " << e;
        ++reported;
      }
    }
  }
}

}  // namespace lazyjit::gpu_test
