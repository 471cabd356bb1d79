// Convolution and pooling: against direct loops over the definition (float64, PyTorch's
// formulas), against the reference interpreter, and their argument errors.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "lazyjit/lazyjit.h"
#include "op_checks.h"

namespace lazyjit {
namespace {

struct ConvCase {
  Shape x, w;
  Size2 stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// The convolution by its definition: out[n, o, y, x] = bias[o] + sum over the group's
/// channels c and window positions (i, j) of w[o, c, i, j] * in[n, g*C/G + c, y*s - p + i*d, ...].
std::vector<double> direct_conv(const ConvCase& k, const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>& b, Shape& out_shape) {
  const int64_t n = k.x[0], c = k.x[1], h = k.x[2], wd = k.x[3], o = k.w[0], cpg = k.w[1], kh = k.w[2], kw = k.w[3];
  const int64_t oh = (h + 2 * k.padding.h - k.dilation.h * (kh - 1) - 1) / k.stride.h + 1;
  const int64_t ow = (wd + 2 * k.padding.w - k.dilation.w * (kw - 1) - 1) / k.stride.w + 1;
  out_shape = {n, o, oh, ow};
  std::vector<double> out(n * o * oh * ow, 0.0);
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t g = oc / (o / k.groups);
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b.empty() ? 0.0 : b[oc];
          for (int64_t cc = 0; cc < cpg; ++cc) {
            for (int64_t i = 0; i < kh; ++i) {
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t r = y * k.stride.h - k.padding.h + i * k.dilation.h;
                const int64_t s = xx * k.stride.w - k.padding.w + j * k.dilation.w;
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                acc += w[((oc * cpg + cc) * kh + i) * kw + j] * x[((in * c + g * cpg + cc) * h + r) * wd + s];
              }
            }
          }
          out[((in * o + oc) * oh + y) * ow + xx] = acc;
        }
      }
    }
  }
  return out;
}

std::vector<double> random_values(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<double> value(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = value(rng);
  return v;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                     const std::string& context) {
  ASSERT_EQ(got.size(), want.size()) << context;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    if (std::abs(got[i] - want[i]) > tolerance * (1 + std::abs(want[i]))) {
      ADD_FAILURE() << context << " element " << i << ": " << got[i] << ", expected " << want[i];
      ++reported;
    }
  }
}

TEST(ConvTest, MatchesTheDefinitionForStridesPaddingDilationAndGroups) {
  const ConvCase cases[] = {
      {{2, 3, 7, 9}, {4, 3, 3, 3}},
      {{1, 4, 8, 8}, {6, 2, 3, 3}, 2, 1, 1, 2},
      {{2, 2, 9, 7}, {3, 2, 3, 2}, {2, 1}, {1, 0}, {2, 1}, 1, false},
      {{1, 6, 5, 5}, {6, 1, 3, 3}, 1, 1, 1, 6},  // depthwise
      {{3, 5, 4, 6}, {2, 5, 1, 1}},               // 1x1
      {{1, 1, 3, 3}, {1, 1, 3, 3}, 1, 0},         // one output element
      {{1, 2, 5, 5}, {2, 2, 5, 5}, 1, 2},         // kernel as large as the padded input needs
      {{2, 3, 6, 6}, {4, 3, 3, 3}, 1, 3},         // more padding than the window reaches
      // The product reads its window in place (stride 1 along W): rows wider than a column
      // panel (a partial last panel), and K = 232 * 9 rows, more than a tile's panel holds.
      {{2, 3, 5, 40}, {7, 3, 3, 3}, 1, 1, {1, 2}},
      {{1, 232, 3, 35}, {3, 232, 3, 3}, {2, 1}, 1},
      // Empty: no images, no output channels, no input channels (K = 0: the bias alone).
      {{0, 3, 5, 5}, {4, 3, 3, 3}, 1, 1},
      {{1, 3, 5, 5}, {0, 3, 3, 3}, 1, 1},
      {{2, 0, 5, 6}, {3, 0, 3, 3}, 1, 1},
  };
  std::mt19937 rng(101);
  for (const ConvCase& k : cases) {
    for (DType dtype : kFloats) {
      const std::vector<double> xs = random_values(rng, numel(k.x)), ws = random_values(rng, numel(k.w));
      const std::vector<double> bs = k.bias ? random_values(rng, k.w[0]) : std::vector<double>{};
      Shape shape;
      const std::vector<double> want = direct_conv(k, xs, ws, bs, shape);
      const Tensor x = Tensor::from_vector<double>(xs, k.x).to(dtype), w = Tensor::from_vector<double>(ws, k.w).to(dtype);
      const Tensor b = k.bias ? Tensor::from_vector<double>(bs, {k.w[0]}).to(dtype) : Tensor();
      const Tensor out = conv2d(x, w, b, k.stride, k.padding, k.dilation, k.groups);
      const std::string context = fmt::format("conv2d x{} w{} groups {} {}", fmt::join(k.x, "x"), fmt::join(k.w, "x"),
                                              k.groups, dtype_name(dtype));
      EXPECT_EQ(out.shape(), shape) << context;
      expect_matches(out, context, k.w[1] * k.w[2] * k.w[3]);
      expect_near_all(out.to(DType::Float64).to_vector<double>(), want, dtype == DType::Float32 ? 1e-5 : 1e-12, context);
    }
  }
}

// The gradients of a convolution, against the interpreter: the weight's is a product that
// reads the window in place as its left operand (rows of the window), the input's is col2im.
TEST(ConvTest, GradientsMatchTheInterpreter) {
  const ConvCase cases[] = {
      {{2, 3, 6, 40}, {4, 3, 3, 3}, 1, 1},             // rows wider than a column panel
      {{1, 5, 7, 9}, {7, 5, 3, 2}, 1, {1, 0}, {2, 1}},  // more output channels than MR rows
      {{2, 4, 9, 8}, {4, 2, 3, 3}, {2, 1}, 1, 1, 2},    // groups, stride along H only
      {{1, 2, 8, 8}, {3, 2, 3, 3}, 2, 1},              // stride 2: the window is packed
      {{1, 2, 5, 6}, {3, 2, 3, 3}, 1, 3},              // more padding than the window reaches
      {{2, 4, 6, 7}, {6, 2, 2, 3}, 1, {0, 2}, {2, 1}, 2},  // groups, dilation, uneven padding
      {{0, 3, 5, 5}, {4, 3, 3, 3}, 1, 1},              // no images: zero gradients
  };
  std::mt19937 rng(107);
  for (const ConvCase& k : cases) {
    for (DType dtype : kFloats) {
      Tensor x = Tensor::from_vector<double>(random_values(rng, numel(k.x)), k.x).to(dtype);
      Tensor w = Tensor::from_vector<double>(random_values(rng, numel(k.w)), k.w).to(dtype);
      x.requires_grad_();
      w.requires_grad_();
      const Tensor y = conv2d(x, w, Tensor(), k.stride, k.padding, k.dilation, k.groups);
      const Tensor gy = Tensor::from_vector<double>(random_values(rng, y.numel()), y.shape()).to(dtype);
      const std::vector<Tensor> grads = grad(sum(y * gy), {x, w});
      const std::string context = fmt::format("conv2d x{} w{} groups {} {}", fmt::join(k.x, "x"), fmt::join(k.w, "x"),
                                              k.groups, dtype_name(dtype));
      expect_matches(grads[0], context + " input gradient", k.w[0] * k.w[2] * k.w[3]);
      expect_matches(grads[1], context + " weight gradient", y.numel() / k.w[0]);
    }
  }
}

// With stride 1 a convolution is one product per image, over the padded width: OH rows of
// Wp columns (5 x 8 here, 40 columns where OW is 6), read in place (rows_of_b, no pack_b);
// the columns past each row's OW are dropped as the result is stored. Its input's gradient
// reads its window in place too, and its weight's is one product per image over all 40
// positions ([2, 1, 27, 4]: K = 3*3*3 rows, 4 output channels), not one per output row.
TEST(ConvTest, StrideOneIsAProductPerImageOverThePaddedWidth) {
  Tensor x = ones({2, 3, 5, 6}), w = ones({4, 3, 3, 3});
  x.requires_grad_();
  w.requires_grad_();
  const Tensor y = conv2d(x, w, Tensor(), 1, 1);
  auto product_shapes = [](const Tensor& t) {
    const std::string ir = dump({t}, DumpFormat::LazyIr);
    std::vector<std::string> shapes;
    for (size_t at = ir.find("= matmul "); at != std::string::npos; at = ir.find("= matmul ", at + 1)) {
      const size_t colon = ir.find(':', at);
      shapes.push_back(ir.substr(colon + 2, ir.find('\n', at) - colon - 2));
    }
    return shapes;
  };
  EXPECT_EQ(product_shapes(y), std::vector<std::string>{"float32[2,1,4,40]"});
  const std::string plan = dump({y}, DumpFormat::Plan);
  EXPECT_NE(plan.find("rows_of_b"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("pack_b"), std::string::npos) << plan;
  const std::vector<Tensor> grads = grad(sum(y), {x, w});
  const std::string backward = dump({grads[0]}, DumpFormat::Plan);
  EXPECT_EQ(backward.find("pack_b"), std::string::npos) << backward;
  EXPECT_EQ(product_shapes(grads[1]), std::vector<std::string>{"float32[2,1,27,4]"});  // g is ones: no forward
  EXPECT_EQ(y.to_vector<float>()[6 + 1], 27.0f);  // [0, 0, 1, 1]: a full 3x3 window of 3 channels
  EXPECT_EQ(grads[1].to_vector<float>()[4], 2 * 5 * 6.0f);  // [0, 0, 1, 1]: every output reads x there
}

// With stride 1 the input's gradient is itself a convolution (conv2d's own rule): no col2im
// (unfold_transpose) and no product K times the input. A stride of 2 takes the nodes' rules.
TEST(ConvTest, StrideOneInputGradientIsAConvolution) {
  for (const int64_t stride : {1, 2}) {
    Tensor x = ones({2, 3, 8, 8});
    x.requires_grad_();
    const Tensor w = ones({4, 3, 3, 3});
    const Tensor dx = grad(sum(conv2d(x, w, Tensor(), stride, 1)), {x})[0];
    const std::string ir = dump({dx}, DumpFormat::LazyIr);
    EXPECT_EQ(ir.find("unfold_transpose") == std::string::npos, stride == 1) << ir;
    // Each input element is covered by up to 9 windows of 4 output channels, all ones.
    const std::vector<float> values = dx.to_vector<float>();
    EXPECT_EQ(values[9], stride == 1 ? 36.0f : 16.0f);  // [0, 0, 1, 1]: a full 3x3 neighbourhood
  }
}

TEST(ConvTest, Conv1dIsAConvolutionOverOneRow) {
  std::mt19937 rng(103);
  const std::vector<double> xs = random_values(rng, 2 * 3 * 11), ws = random_values(rng, 4 * 3 * 3);
  const Tensor x = Tensor::from_vector<double>(xs, {2, 3, 11}), w = Tensor::from_vector<double>(ws, {4, 3, 3});
  const Tensor out = conv1d(x, w, Tensor(), 2, 1, 2);
  const Tensor as_2d = conv2d(unsqueeze(x, 2), unsqueeze(w, 2), Tensor(), {1, 2}, {0, 1}, {1, 2});
  EXPECT_EQ(out.shape(), (Shape{2, 4, 5}));
  EXPECT_EQ(out.to_vector<double>(), as_2d.to_vector<double>());
  EXPECT_EQ(conv1d(reshape(slice(x, 0, 0, 1), {3, 11}), w).shape(), (Shape{4, 9}));  // unbatched
}

/// Pooling by its definition: the max (first NaN wins) or the mean of each window.
/// PyTorch's pooling_output_shape: windows along an extent, in floor or ceil mode.
int64_t pooled_size(int64_t size, int64_t k, int64_t stride, int64_t pad, bool ceil_mode) {
  int64_t out = (size + 2 * pad - k + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= size + pad) --out;
  return out;
}

std::vector<double> direct_pool(const Shape& s, const std::vector<double>& x, Size2 k, Size2 stride, Size2 pad, bool max,
                                bool include_pad, bool ceil_mode = false) {
  const int64_t oh = pooled_size(s[2], k.h, stride.h, pad.h, ceil_mode), ow = pooled_size(s[3], k.w, stride.w, pad.w, ceil_mode);
  std::vector<double> out;
  for (int64_t nc = 0; nc < s[0] * s[1]; ++nc) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t xx = 0; xx < ow; ++xx) {
        double best = -std::numeric_limits<double>::infinity(), total = 0;
        int64_t count = 0;
        for (int64_t i = 0; i < k.h; ++i) {
          for (int64_t j = 0; j < k.w; ++j) {
            const int64_t r = y * stride.h - pad.h + i, c = xx * stride.w - pad.w + j;
            if (r < 0 || r >= s[2] || c < 0 || c >= s[3]) continue;
            const double v = x[(nc * s[2] + r) * s[3] + c];
            best = std::max(best, v);
            total += v;
            ++count;
          }
        }
        // PyTorch's divisor when the padding counts: the window clipped to the padded input.
        const int64_t r0 = y * stride.h - pad.h, c0 = xx * stride.w - pad.w;
        const int64_t covered = (std::min(r0 + k.h, s[2] + pad.h) - r0) * (std::min(c0 + k.w, s[3] + pad.w) - c0);
        out.push_back(max ? best : total / static_cast<double>(include_pad ? covered : count));
      }
    }
  }
  return out;
}

TEST(PoolTest, MaxAndAveragePoolingMatchTheDefinition) {
  std::mt19937 rng(107);
  struct Case {
    Shape x;
    Size2 kernel;
    std::optional<Size2> stride;
    Size2 padding = 0;
  };
  const Case cases[] = {{{2, 3, 8, 8}, 2}, {{1, 2, 7, 9}, 3, 2, 1}, {{2, 1, 5, 6}, {2, 3}, {{1, 2}}, {1, 0}}, {{1, 1, 1, 1}, 1}};
  for (const Case& k : cases) {
    const Size2 stride = k.stride.value_or(k.kernel);
    const std::vector<double> xs = random_values(rng, numel(k.x));
    const Tensor x = Tensor::from_vector<double>(xs, k.x);
    const std::string context = fmt::format("pool of {} kernel {}x{}", fmt::join(k.x, "x"), k.kernel.h, k.kernel.w);
    const Tensor max = max_pool2d(x, k.kernel, k.stride, k.padding);
    expect_matches(max, context);
    EXPECT_EQ(max.to_vector<double>(), direct_pool(k.x, xs, k.kernel, stride, k.padding, true, true)) << context;
    expect_near_all(avg_pool2d(x, k.kernel, k.stride, k.padding).to_vector<double>(),
                    direct_pool(k.x, xs, k.kernel, stride, k.padding, false, true), 1e-12, context);
    expect_near_all(avg_pool2d(x, k.kernel, k.stride, k.padding, false).to_vector<double>(),
                    direct_pool(k.x, xs, k.kernel, stride, k.padding, false, false), 1e-12, context);
  }
  // Ceil mode: windows that hang past the padding (PyTorch's ceil_mode), pooling and dividing
  // by what they cover.
  const Case ceil_cases[] = {{{1, 2, 7, 6}, 3, 2}, {{2, 1, 8, 9}, 3, 2, 1}, {{1, 1, 7, 7}, 2}, {{1, 1, 5, 5}, 2, 2, 1},
                             {{1, 1, 7, 9}, {3, 2}, {{2, 3}}, {1, 0}}};
  for (const Case& k : ceil_cases) {
    const Size2 stride = k.stride.value_or(k.kernel);
    const std::vector<double> xs = random_values(rng, numel(k.x));
    const Tensor x = Tensor::from_vector<double>(xs, k.x);
    const std::string context = fmt::format("ceil-mode pool of {} kernel {}x{}", fmt::join(k.x, "x"), k.kernel.h, k.kernel.w);
    const Tensor max = max_pool2d(x, k.kernel, k.stride, k.padding, /*ceil_mode=*/true);
    expect_matches(max, context);
    EXPECT_EQ(max.to_vector<double>(), direct_pool(k.x, xs, k.kernel, stride, k.padding, true, true, true)) << context;
    expect_near_all(avg_pool2d(x, k.kernel, k.stride, k.padding, true, true).to_vector<double>(),
                    direct_pool(k.x, xs, k.kernel, stride, k.padding, false, true, true), 1e-12, context);
    expect_near_all(avg_pool2d(x, k.kernel, k.stride, k.padding, false, true).to_vector<double>(),
                    direct_pool(k.x, xs, k.kernel, stride, k.padding, false, false, true), 1e-12, context);
  }
  EXPECT_EQ(max_pool2d(zeros({1, 1, 7, 6}), 3, 2, 0, true).shape(), (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(max_pool2d(zeros({1, 1, 7, 6}), 3, 2, 0, false).shape(), (std::vector<int64_t>{1, 1, 3, 2}));
  EXPECT_EQ(avg_pool2d(zeros({1, 1, 5, 5}), 2, 2, 1, true, true).shape(), (std::vector<int64_t>{1, 1, 3, 3}))
      << "the last window would start in the padding: not counted";
  // Integers pool too (the padding below every int32), and a window's NaN is its maximum.
  const Tensor ints = Tensor::from_vector<int32_t>({-5, -7, -9, -8}, {1, 1, 2, 2});
  EXPECT_EQ(max_pool2d(ints, 2, 1, 1).to_vector<int32_t>(), (std::vector<int32_t>{-5, -5, -7, -5, -5, -7, -9, -8, -8}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(max_pool2d(Tensor::from_vector<double>({1, nan, 3, 4}, {1, 1, 2, 2}), 2).item<double>()));
  const Tensor x = Tensor::from_vector<double>(random_values(rng, 2 * 3 * 6 * 4), {2, 3, 6, 4});
  expect_near_all(adaptive_avg_pool2d(x, 1).to_vector<double>(), mean(x, {2, 3}, true).to_vector<double>(), 1e-12,
                  "global pooling");
  expect_near_all(adaptive_avg_pool2d(x, {3, 2}).to_vector<double>(), avg_pool2d(x, 2).to_vector<double>(), 1e-12,
                  "adaptive pooling");
}

/// PyTorch's adaptive average pooling, by its definition: window i of `out` over `in` spans
/// floor(i * in / out) to ceil((i + 1) * in / out).
std::vector<double> direct_adaptive_pool(const std::vector<int64_t>& s, const std::vector<double>& x, int64_t oh, int64_t ow) {
  const int64_t planes = s[0] * s[1], h = s[2], w = s[3];
  std::vector<double> out;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t r0 = i * h / oh, r1 = ((i + 1) * h + oh - 1) / oh, c0 = j * w / ow, c1 = ((j + 1) * w + ow - 1) / ow;
        double sum = 0;
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) sum += x[(p * h + r) * w + c];
        }
        out.push_back(sum / static_cast<double>((r1 - r0) * (c1 - c0)));
      }
    }
  }
  return out;
}

TEST(PoolTest, AdaptivePoolingWithUnequalWindowsMatchesTheDefinition) {
  std::mt19937 rng(7);
  struct Case {
    std::vector<int64_t> x;
    Size2 out;
  };
  const Case cases[] = {{{2, 3, 5, 7}, {3, 4}}, {{1, 2, 7, 5}, {4, 2}}, {{1, 1, 3, 3}, {5, 5}}, {{2, 1, 6, 1}, {4, 1}}};
  for (const Case& k : cases) {
    const std::string context = fmt::format("{} -> {}x{}", fmt::join(k.x, "x"), k.out.h, k.out.w);
    const std::vector<double> xs = random_values(rng, k.x[0] * k.x[1] * k.x[2] * k.x[3]);
    const Tensor x = Tensor::from_vector<double>(xs, k.x);
    const Tensor y = adaptive_avg_pool2d(x, k.out);
    // The gradient of sum(y * g), taken before y is read, checked by central differences below.
    const std::vector<double> gs = random_values(rng, y.numel());
    const Tensor g = Tensor::from_vector<double>(gs, y.shape());
    const Tensor dx_lazy = grad(sum(y * g), {x})[0];
    EXPECT_EQ(y.shape(), (std::vector<int64_t>{k.x[0], k.x[1], k.out.h, k.out.w})) << context;
    expect_near_all(y.to_vector<double>(), direct_adaptive_pool(k.x, xs, k.out.h, k.out.w), 1e-12, context);
    const std::vector<double> dx = dx_lazy.to_vector<double>();
    const double eps = 1e-6;
    for (int64_t e = 0; e < x.numel(); e += 3) {
      std::vector<double> up = xs, down = xs;
      up[e] += eps;
      down[e] -= eps;
      auto f = [&](const std::vector<double>& v) {
        const std::vector<double> pooled = direct_adaptive_pool(k.x, v, k.out.h, k.out.w);
        double total = 0;
        for (size_t q = 0; q < pooled.size(); ++q) total += pooled[q] * gs[q];
        return total;
      };
      EXPECT_NEAR(dx[e], (f(up) - f(down)) / (2 * eps), 1e-6) << context << " element " << e;
    }
  }
}

TEST(ConvTest, BadShapesAndArgumentsNameTheOpAndValues) {
  const Tensor x = zeros({2, 4, 5, 5}), w = zeros({6, 4, 3, 3});
  expect_error([&] { conv2d(zeros({4, 5}), w); }, "conv2d: expected an input of shape [N, C, H, W], got [4,5]");
  expect_error([&] { conv2d(x, zeros({6, 4, 3})); },
               "conv2d: expected a weight of shape [out_channels, in_channels / groups, kh, kw], got [6,4,3]");
  expect_error([&] { conv2d(x, zeros({6, 3, 3, 3})); },
               "conv2d: a weight of shape [6,3,3,3] in 1 group expects 3 input channels, got 4 (input [2,4,5,5])");
  expect_error([&] { conv2d(x, zeros({6, 2, 3, 3}), Tensor(), 1, 0, 1, 3); },
               "conv2d: groups 3 must be positive and divide the 4 input and 6 output channels");
  expect_error([&] { conv2d(x, zeros({6, 4, 7, 3})); },
               "conv2d: a 7x3 window is larger than the padded input 5x5");
  expect_error([&] { conv2d(x, w, Tensor(), 1, 0, 3); },
               "conv2d: a 3x3 window (dilation 3x3) is larger than the padded input 5x5");
  expect_error([&] { conv2d(x, w, zeros({5})); }, "conv2d: expected a bias of shape [6], got [5]");
  expect_error([&] { conv2d(x, w, Tensor(), 0); }, "conv2d: stride 0x0 must be positive");
  expect_error([&] { conv2d(x, w, Tensor(), 1, {-1, 0}); }, "conv2d: padding -1x0 must be non-negative");
  expect_error([&] { conv2d(x, w.to(DType::Float64)); },
               "conv2d: input and weight must have one float dtype, got float32 and float64");
  expect_error([&] { conv1d(x, w); }, "conv1d: expected an input of shape [N, C, L], got [2,4,5,5]");
  // conv1d is a conv2d inside; its errors speak of what the user passed.
  const Tensor line = zeros({2, 3, 9});
  expect_error([&] { conv1d(line, zeros({4, 2, 3})); },
               "conv1d: a weight of shape [4,2,3] in 1 group expects 2 input channels, got 3 (input [2,3,9])");
  expect_error([&] { conv1d(line, zeros({4, 3, 12})); },
               "conv1d: a window of 12 (kernel 12, dilation 1) is larger than the padded input of 9");
  expect_error([&] { conv1d(line, zeros({4, 3, 4}), Tensor(), 1, 0, 3); },
               "conv1d: a window of 10 (kernel 4, dilation 3) is larger than the padded input of 9");
  expect_error([&] { conv1d(line, zeros({4, 1, 3}), Tensor(), 1, 0, 1, 2); },
               "conv1d: groups 2 must be positive and divide the 3 input and 4 output channels");
  expect_error([&] { conv1d(line, zeros({4, 3, 3}), Tensor(), 0); }, "conv1d: stride 0 must be positive");
  expect_error([&] { conv1d(line, zeros({4, 3, 3}), zeros({3})); }, "conv1d: expected a bias of shape [4], got [3]");
  expect_error([&] { max_pool2d(x, 3, 1, 2); }, "max_pool2d: padding 2x2 should be at most half the kernel size 3x3");
  expect_error([&] { max_pool2d(x, 6); }, "max_pool2d: a 6x6 window is larger than the padded input 5x5");
  expect_error([&] { avg_pool2d(zeros({1, 1, 4, 4}, DType::Int64), 2); }, "avg_pool2d: expected a float input, got int64");
  expect_error([&] { adaptive_avg_pool2d(x, {0, 2}); }, "adaptive_avg_pool2d: output size 0x2 must be positive");
  expect_error([&] { adaptive_avg_pool2d(zeros({1, 1, 4, 4}, DType::Int32), 3); },
               "adaptive_avg_pool2d: expected a float input, got int32");
}

}  // namespace
}  // namespace lazyjit
