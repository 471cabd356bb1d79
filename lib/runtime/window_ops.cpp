// Convolution and pooling over NCHW, PyTorch's conventions, as compositions over
// sliding-window views (ir::OpKind::Unfold, im2col that is never stored): a convolution is
// a matmul of the weights with a view of its stored padding (which the micro-kernel reads
// in place, or reads through as it packs), a pooling a fold over the window dim.
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "fmt/format.h"
#include "ir/structured.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "runtime/custom_gradient.h"
#include "runtime/traced_node.h"

namespace lazyjit {
namespace {

using traced::value_of;

std::string shape_text(const Tensor& t) { return ir::shape_to_string(t.impl()->ir_value()->shape()); }

/// Checks what PyTorch checks of strides, padding and dilation, naming `op`.
void check_window_args(std::string_view op, Size2 stride, Size2 padding, Size2 dilation) {
  if (stride.h < 1 || stride.w < 1) throw Error(fmt::format("{}: stride {}x{} must be positive", op, stride.h, stride.w));
  if (padding.h < 0 || padding.w < 0) {
    throw Error(fmt::format("{}: padding {}x{} must be non-negative", op, padding.h, padding.w));
  }
  if (dilation.h < 1 || dilation.w < 1) {
    throw Error(fmt::format("{}: dilation {}x{} must be positive", op, dilation.h, dilation.w));
  }
}

/// What PyTorch checks of a convolution's operands (of any rank, [N, C, ...] and [O, C/groups,
/// ...]), naming `op`.
void check_conv_operands(std::string_view op, const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups) {
  if (!is_floating(x.dtype()) || x.dtype() != weight.dtype()) {
    throw Error(fmt::format("{}: input and weight must have one float dtype, got {} and {}", op, dtype_name(x.dtype()),
                            dtype_name(weight.dtype())));
  }
  const int64_t channels = x.shape()[1], out_channels = weight.shape()[0];
  if (groups < 1 || channels % groups != 0 || out_channels % groups != 0) {
    throw Error(fmt::format("{}: groups {} must be positive and divide the {} input and {} output channels", op, groups,
                            channels, out_channels));
  }
  if (weight.shape()[1] * groups != channels) {
    throw Error(fmt::format("{}: a weight of shape {} in {} group{} expects {} input channels, got {} (input {})", op,
                            shape_text(weight), groups, groups == 1 ? "" : "s", weight.shape()[1] * groups, channels,
                            shape_text(x)));
  }
  if (bias.defined() && (bias.dim() != 1 || bias.shape()[0] != out_channels)) {
    throw Error(fmt::format("{}: expected a bias of shape [{}], got {}", op, out_channels, shape_text(bias)));
  }
}

/// The sliding-window view of `x` ([N, C, H, W]): [N, groups, C/groups * kh*kw, OH, OW]; its
/// shape errors are named after `op`.
Tensor window_view(std::string_view op, const Tensor& x, int64_t groups, Size2 kernel, Size2 stride, Size2 padding,
                   Size2 dilation) {
  ir::NodePtr node = value_of(x, op);
  if (node->rank() != 4) {
    throw Error(fmt::format("{}: expected an input of shape [N, C, H, W], got {}", op, ir::shape_to_string(node->shape())));
  }
  if (kernel.h < 1 || kernel.w < 1) throw Error(fmt::format("{}: kernel size {}x{} must be positive", op, kernel.h, kernel.w));
  check_window_args(op, stride, padding, dilation);
  return traced::pending(traced::check_as(
      op, ir::make_structured(ir::OpKind::Unfold, {std::move(node)},
                              {groups, kernel.h, kernel.w, stride.h, stride.w, padding.h, padding.w, dilation.h, dilation.w})));
}

/// `x` ([N, C, H, W]) with rows and columns of zeros: `before` ahead of its first, `after`
/// past its last. Rows first, then columns: the last cat is along the innermost dim, which
/// the kernel stores part by part (a row's zeros, then a contiguous copy of x's row, whose
/// choice between a row of zeros and a row of x is invariant along it), not by selecting
/// among every part's clamped read at every element.
Tensor zero_pad(const Tensor& x, Size2 before, Size2 after) {
  Tensor padded = x;
  for (const auto& [dim, ahead, behind] : {std::tuple{2, before.h, after.h}, std::tuple{3, before.w, after.w}}) {
    auto zero = [&](int64_t n) {
      std::vector<int64_t> edge = padded.shape();
      edge[dim] = n;
      return zeros(edge, x.dtype());
    };
    const Tensor first = ahead > 0 ? zero(ahead) : Tensor();
    const Tensor last = behind == ahead ? first : behind > 0 ? zero(behind) : Tensor();
    std::vector<Tensor> parts;
    if (first.defined()) parts.push_back(first);
    parts.push_back(padded);
    if (last.defined()) parts.push_back(last);
    if (parts.size() > 1) padded = cat(parts, dim);
  }
  return padded;
}

/// A pooling's window over each channel of `x`: [N, C, kh*kw, OH, OW].
Tensor pool_view(std::string_view op, const Tensor& x, Size2 kernel, Size2 stride, Size2 padding) {
  if (padding.h * 2 > kernel.h || padding.w * 2 > kernel.w) {
    throw Error(fmt::format("{}: padding {}x{} should be at most half the kernel size {}x{}", op, padding.h, padding.w,
                            kernel.h, kernel.w));
  }
  return window_view(op, x, x.dim() == 4 ? x.shape()[1] : 1, kernel, stride, padding, 1);
}

/// Rows (or columns) past the end of an extent `size` that a pooling in ceil mode reads: it
/// has ceil((size + 2 pad - kernel) / stride) + 1 windows (PyTorch's pooling_output_shape),
/// less the last if it would start past the input, where floor mode has fewer.
int64_t ceil_extra(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  int64_t out = (size + 2 * pad - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= size + pad) --out;
  return std::max<int64_t>(0, (out - 1) * stride + kernel - (size + 2 * pad));
}

/// A pooling's extent past the input's end in ceil mode (0x0 in floor mode).
Size2 ceil_extent(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, bool ceil_mode) {
  if (!ceil_mode) return 0;
  return {ceil_extra(x.shape()[2], kernel.h, stride.h, padding.h), ceil_extra(x.shape()[3], kernel.w, stride.w, padding.w)};
}

/// `x` ([N, C, H, W]) with `extra` rows and columns of zeros after its last (ceil mode's
/// windows read them; a pooling masks or divides them out).
Tensor pad_after(const Tensor& x, Size2 extra) { return zero_pad(x, 0, extra); }

/// Per window element of a pooling of `x`: 1 inside the input, 0 in the padding and in
/// ceil mode's `extra` rows and columns.
Tensor inside_input(std::string_view op, const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, Size2 extra) {
  return window_view(op, pad_after(ones(x.shape(), x.dtype()), extra), x.shape()[1], kernel, stride, padding, 1);
}

/// Per window of an average pooling that counts the padding ([OH, OW] in x's dtype): the
/// elements it covers of the input and its padding, as PyTorch's divisor: kh*kw but where a
/// window of ceil mode hangs past the padding.
Tensor covered_by_window(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, int64_t oh, int64_t ow) {
  auto along = [&](int64_t out, int64_t size, int64_t k, int64_t s, int64_t pad) {
    const Tensor start = arange(out) * Scalar(s) - Scalar(pad);
    return (clamp(start + Scalar(k), Scalar(std::numeric_limits<int64_t>::min()), Scalar(size + pad)) - start).to(x.dtype());
  };
  return unsqueeze(along(oh, x.shape()[2], kernel.h, stride.h, padding.h), 1) *
         unsqueeze(along(ow, x.shape()[3], kernel.w, stride.w, padding.w), 0);
}

/// A stride-1 convolution's window over the padded width: [N, groups, C/groups * kh*kw,
/// oh * wp], the rows (c, i, j) of the product and its columns the output rows laid end to
/// end at the padded pitch wp, so that column p + 1 is the element of `padded` after column
/// p's, across the ends of rows (the wp - ow columns past each row's end are not the
/// convolution's). A window one column wide gives (c, i) over the rows laid end to end, and a
/// window one row high over that gives j. `padded` is the input with its padding and a row of
/// zeros more below, which the last row's columns past its end read.
Tensor padded_width_window(const Tensor& padded, int64_t groups, Size2 kernel, Size2 dilation, int64_t oh) {
  const int64_t n = padded.shape()[0], channels = padded.shape()[1], wp = padded.shape()[3];
  const Tensor columns = window_view("conv2d", padded, groups, {kernel.h, 1}, 1, 0, {dilation.h, 1});
  const Tensor laid = reshape(columns, {n, channels * kernel.h, 1, (oh + 1) * wp});
  const Tensor rows = window_view("conv2d", laid, groups, {1, kernel.w}, 1, 0, {1, dilation.w});
  return reshape(slice(rows, 4, 0, oh * wp), {n, groups, channels / groups * kernel.h * kernel.w, oh * wp});
}

/// conv2d's own gradient rule (stride 1, conv2d_unit_stride) where its padding is at most the
/// dilated window's reach (else its nodes' rules give the gradients). `window` is the
/// forward product's padded_width_window, of padded width `wp`. The input's gradient is then
/// a convolution too, of g with
/// the weights flipped and transposed per group, padded by d*(k-1) - p: the product reads
/// g's window in place, where the nodes' rules would store a product K times the input and
/// sum its windows (col2im). The weight's is the padded-width window times g^T, g with zeros
/// in the columns past each row's end: one product per image over all its output positions,
/// which reads the window in place by rows, summed over the images. The bias's is g summed
/// over all but the channels.
void give_conv2d_gradient(const Tensor& result, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const Tensor& window, int64_t wp, Size2 padding, Size2 dilation, int64_t groups) {
  const int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  const Size2 reach{dilation.h * (kh - 1) - padding.h, dilation.w * (kw - 1) - padding.w};
  if (reach.h < 0 || reach.w < 0) return;
  // The rule keeps neither tensors nor nodes (runtime/custom_gradient.h): a tensor it kept
  // would be live, and each step barrier would materialise it (the window: im2col). The
  // window is an operand of the result's product, so it lives as long as the result does.
  std::weak_ptr<const ir::Node> w_node = value_of(weight, "conv2d"), window_node = value_of(window, "conv2d");
  std::vector<std::weak_ptr<const ir::Node>> inputs = {value_of(x, "conv2d"), w_node};
  if (bias.defined()) inputs.push_back(value_of(bias, "conv2d"));
  runtime::set_custom_gradient(
      result.impl()->ir_value(),
      {std::move(inputs), [w_node, window_node, wp, reach, dilation, groups, has_bias = bias.defined()](const Tensor& g) {
         const Tensor w = traced::pending(w_node.lock());
         const int64_t out_channels = w.shape()[0], per_group = out_channels / groups, kh = w.shape()[2], kw = w.shape()[3];
         const int64_t in_per_group = w.shape()[1];
         const Tensor by_group = reshape(flip(w, {2, 3}), {groups, per_group, in_per_group, kh, kw});
         const Tensor turned = reshape(permute(by_group, {0, 2, 1, 3, 4}), {groups * in_per_group, per_group, kh, kw});
         const Tensor dx = conv2d(g, turned, Tensor(), 1, reach, dilation, groups);
         const std::vector<int64_t> y = g.shape();
         const Tensor laid = reshape(zero_pad(g, 0, {0, wp - y[3]}), {y[0], groups, per_group, y[2] * wp});
         const Tensor window = traced::pending(window_node.lock());
         const Tensor dw = sum(matmul(window, transpose(laid, 2, 3)), {0});  // [groups, K, O/groups]
         return std::vector<Tensor>{dx, reshape(permute(dw, {0, 2, 1}), w.shape()), has_bias ? sum(g, {0, 2, 3}) : Tensor()};
       }});
}

/// conv2d with stride 1: one product per image, of the weights with padded_width_window,
/// which reads the stored padding in place. The pass that stores the result adds the bias
/// and drops the columns past each row's end.
Tensor conv2d_unit_stride(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 padding, Size2 dilation,
                          int64_t groups) {
  const int64_t n = x.shape()[0], out_channels = weight.shape()[0];
  const Size2 kernel{weight.shape()[2], weight.shape()[3]};
  const int64_t hp = x.shape()[2] + 2 * padding.h, wp = x.shape()[3] + 2 * padding.w;
  const Tensor padded = zero_pad(x, padding, {padding.h + 1, padding.w});
  // The convolution's window over the padding less the row below: the shape checks, and its
  // extent.
  const Tensor view = window_view("conv2d", slice(padded, 2, 0, hp), groups, kernel, 1, 0, dilation);
  const int64_t oh = view.shape()[3], ow = view.shape()[4];
  const Tensor window = padded_width_window(padded, groups, kernel, dilation, oh);
  Tensor out = matmul(reshape(weight, {groups, out_channels / groups, window.shape()[2]}), window);
  if (bias.defined()) out = out + reshape(bias.to(out.dtype()), {groups, out_channels / groups, 1});
  const Tensor result = slice(reshape(out, {n, out_channels, oh, wp}), 3, 0, ow);
  give_conv2d_gradient(result, x, weight, bias, window, wp, padding, dilation, groups);
  return result;
}

/// conv2d with a stride other than 1: a product per output row, [groups, O/groups, K] @
/// [N, OH, groups, K, OW], whose columns (ow) read the padded input at the stride. The
/// padding is stored once and the product reads the window in place when the stride along W
/// is 1; one pass adds the bias and puts the rows in NCHW order.
Tensor conv2d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                      Size2 dilation, int64_t groups) {
  const int64_t out_channels = weight.shape()[0];
  const Size2 kernel{weight.shape()[2], weight.shape()[3]};
  const int64_t k = weight.shape()[1] * kernel.h * kernel.w;
  const Tensor view = window_view("conv2d", zero_pad(x, padding, padding), groups, kernel, stride, 0, dilation);
  Tensor out = matmul(reshape(weight, {groups, out_channels / groups, k}), permute(view, {0, 3, 1, 2, 4}));
  if (bias.defined()) out = out + reshape(bias.to(out.dtype()), {groups, out_channels / groups, 1});
  return reshape(permute(out, {0, 2, 3, 1, 4}), {x.shape()[0], out_channels, view.shape()[3], view.shape()[4]});
}

}  // namespace

Tensor unfold(const Tensor& x, Size2 kernel_size, Size2 dilation, Size2 padding, Size2 stride) {
  const Tensor view = window_view("unfold", x, 1, kernel_size, stride, padding, dilation);
  return reshape(view, {view.shape()[0], view.shape()[2], view.shape()[3] * view.shape()[4]});
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              int64_t groups) {
  value_of(x, "conv2d");
  value_of(weight, "conv2d");
  if (x.dim() == 3) return squeeze(conv2d(unsqueeze(x, 0), weight, bias, stride, padding, dilation, groups), 0);
  if (x.dim() != 4) throw Error(fmt::format("conv2d: expected an input of shape [N, C, H, W], got {}", shape_text(x)));
  if (weight.dim() != 4) {
    throw Error(fmt::format("conv2d: expected a weight of shape [out_channels, in_channels / groups, kh, kw], got {}",
                            shape_text(weight)));
  }
  check_conv_operands("conv2d", x, weight, bias, groups);
  check_window_args("conv2d", stride, padding, dilation);
  return stride.h == 1 && stride.w == 1 ? conv2d_unit_stride(x, weight, bias, padding, dilation, groups)
                                         : conv2d_strided(x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  value_of(x, "conv1d");
  value_of(weight, "conv1d");
  if (x.dim() == 2) return squeeze(conv1d(unsqueeze(x, 0), weight, bias, stride, padding, dilation, groups), 0);
  if (x.dim() != 3) throw Error(fmt::format("conv1d: expected an input of shape [N, C, L], got {}", shape_text(x)));
  if (weight.dim() != 3) {
    throw Error(fmt::format("conv1d: expected a weight of shape [out_channels, in_channels / groups, k], got {}",
                            shape_text(weight)));
  }
  // Checked here in conv1d's terms: conv2d, which computes it, would speak of [N, C, 1, L].
  check_conv_operands("conv1d", x, weight, bias, groups);
  if (stride < 1) throw Error(fmt::format("conv1d: stride {} must be positive", stride));
  if (padding < 0) throw Error(fmt::format("conv1d: padding {} must be non-negative", padding));
  if (dilation < 1) throw Error(fmt::format("conv1d: dilation {} must be positive", dilation));
  const int64_t window = dilation * (weight.shape()[2] - 1) + 1, padded = x.shape()[2] + 2 * padding;
  if (window > padded) {
    throw Error(fmt::format("conv1d: a window of {} (kernel {}, dilation {}) is larger than the padded input of {}",
                            window, weight.shape()[2], dilation, padded));
  }
  return squeeze(conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, {1, stride}, {0, padding}, {1, dilation}, groups), 2);
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode) {
  value_of(x, "max_pool2d");
  if (x.dim() == 3) return squeeze(max_pool2d(unsqueeze(x, 0), kernel_size, stride, padding, ceil_mode), 0);
  if (x.dtype() == DType::Bool) throw Error("max_pool2d: bool inputs are not supported");
  const Size2 step = stride.value_or(kernel_size);
  Tensor view = pool_view("max_pool2d", x, kernel_size, step, padding);  // checks x's shape first
  const Size2 extra = ceil_extent(x, kernel_size, step, padding, ceil_mode);
  if (extra.h > 0 || extra.w > 0) view = pool_view("max_pool2d", pad_after(x, extra), kernel_size, step, padding);
  if (padding.h > 0 || padding.w > 0 || extra.h > 0 || extra.w > 0) {  // the padding is below every value, as PyTorch's
    const Tensor inside = gt(inside_input("max_pool2d", x, kernel_size, step, padding, extra), 0);
    view = is_floating(x.dtype()) ? where(inside, view, -std::numeric_limits<double>::infinity())
                                  : where(inside, view, Scalar(x.dtype() == DType::Int32 ? int64_t{INT32_MIN} : INT64_MIN));
  }
  // The first maximum of each window (NaN counts as the maximum), gathered: its gradient
  // goes to that element alone, as PyTorch's.
  const Tensor picked = gather(view, 2, argmax(view, 2, /*keepdim=*/true));
  return reshape(picked, {x.shape()[0], x.shape()[1], view.shape()[3], view.shape()[4]});
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                  bool count_include_pad, bool ceil_mode) {
  value_of(x, "avg_pool2d");
  if (x.dim() == 3) return squeeze(avg_pool2d(unsqueeze(x, 0), kernel_size, stride, padding, count_include_pad, ceil_mode), 0);
  if (!is_floating(x.dtype())) throw Error(fmt::format("avg_pool2d: expected a float input, got {}", dtype_name(x.dtype())));
  const Size2 step = stride.value_or(kernel_size);
  Tensor view = pool_view("avg_pool2d", x, kernel_size, step, padding);  // checks x's shape first
  const Size2 extra = ceil_extent(x, kernel_size, step, padding, ceil_mode);
  const bool past = extra.h > 0 || extra.w > 0;
  if (past) view = pool_view("avg_pool2d", pad_after(x, extra), kernel_size, step, padding);
  const int64_t oh = view.shape()[3], ow = view.shape()[4];
  const Tensor summed = sum(view, {2});
  Tensor count;
  if (!count_include_pad && (padding.h > 0 || padding.w > 0 || past)) {
    count = sum(inside_input("avg_pool2d", x, kernel_size, step, padding, extra), {2});
  } else if (past) {
    count = covered_by_window(x, kernel_size, step, padding, oh, ow);
  } else {
    count = full({}, static_cast<double>(kernel_size.h * kernel_size.w), x.dtype());
  }
  return reshape(summed / count, {x.shape()[0], x.shape()[1], oh, ow});
}

namespace {

/// The [out, in] matrix whose row i averages PyTorch's adaptive window i of an extent `in`:
/// positions floor(i * in / out) to ceil((i + 1) * in / out), windows that may differ in size
/// and overlap. Built from run-time values, so the graph is the same for every size.
Tensor adaptive_window_weights(int64_t in, int64_t out, DType dtype) {
  const Tensor i = unsqueeze(arange(out), 1), j = unsqueeze(arange(in), 0);
  const Tensor start = floor_divide(i * Scalar(in), Scalar(out));
  const Tensor end = floor_divide((i + Scalar(1)) * Scalar(in) + Scalar(out - 1), Scalar(out));
  const Tensor inside = logical_and(ge(j, start), lt(j, end));
  return inside.to(dtype) / (end - start).to(dtype);
}

}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size) {
  value_of(x, "adaptive_avg_pool2d");
  if (x.dim() == 3) return squeeze(adaptive_avg_pool2d(unsqueeze(x, 0), output_size), 0);
  if (x.dim() != 4) {
    throw Error(fmt::format("adaptive_avg_pool2d: expected an input of shape [N, C, H, W], got {}", shape_text(x)));
  }
  if (!is_floating(x.dtype())) {
    throw Error(fmt::format("adaptive_avg_pool2d: expected a float input, got {}", dtype_name(x.dtype())));
  }
  const int64_t h = x.shape()[2], w = x.shape()[3];
  if (output_size.h < 1 || output_size.w < 1) {
    throw Error(fmt::format("adaptive_avg_pool2d: output size {}x{} must be positive", output_size.h, output_size.w));
  }
  if (output_size.h == 1 && output_size.w == 1) return mean(x, {2, 3}, /*keepdim=*/true);  // global pooling
  if (h % output_size.h == 0 && w % output_size.w == 0) {  // equal windows that tile the input
    const Size2 window{h / output_size.h, w / output_size.w};
    return avg_pool2d(x, window, window, 0);
  }
  // Unequal windows: the means along H and along W as two products with averaging matrices.
  const Tensor rows = adaptive_window_weights(h, output_size.h, x.dtype());
  const Tensor cols = adaptive_window_weights(w, output_size.w, x.dtype());
  return matmul(matmul(rows, x), transpose(cols, 0, 1));
}

}  // namespace lazyjit
