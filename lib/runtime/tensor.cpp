// The public Tensor: creation from host data, metadata, reads and in-place updates.
#include <unistd.h>

#include <cstring>

#include "fmt/format.h"
#include "ir/builder.h"
#include "lazyjit/backend.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "lazyjit/tensor.h"
#include "runtime/runtime.h"

namespace lazyjit {

using runtime::Runtime;

namespace {

[[noreturn]] void fail(const absl::Status& status) { throw Error(std::string(status.message())); }

/// The tensor's data, computing it first if needed; a reference, so the buffer stays valid
/// while it is read even if another thread updates the tensor.
BackendDataPtr materialized(const std::shared_ptr<detail::TensorImpl>& impl) {
  for (;;) {
    if (BackendDataPtr data = impl->data()) return data;
    Runtime::get().graph_executor().sync({impl});
  }
}

}  // namespace

namespace detail {

/// A new pending tensor over `node` (used by every op).
Tensor make_pending(ir::NodePtr node) {
  Runtime::get().counters().nodes_traced.fetch_add(1, std::memory_order_relaxed);
  return Tensor(TensorImpl::create(std::move(node), Runtime::get().live()));
}

}  // namespace detail

Tensor Tensor::from_data(const void* data, int64_t count, DType dtype, std::vector<int64_t> shape) {
  if (absl::Status status = ir::validate_dims("from_vector", shape); !status.ok()) fail(status);
  const int64_t n = ir::numel(shape);
  if (n != count) {
    throw Error(fmt::format("from_vector: {} elements do not fill shape {} ({} elements)", count,
                            ir::shape_to_string(shape), n));
  }
  Runtime& rt = Runtime::get();
  auto buffer = std::make_shared<runtime::CpuBuffer>(rt.allocator(), dtype, std::move(shape));
  if (n > 0) std::memcpy(buffer->data(), data, static_cast<size_t>(buffer->size_bytes()));
  rt.counters().bytes_in.fetch_add(buffer->size_bytes(), std::memory_order_relaxed);
  return Tensor(detail::TensorImpl::create(std::move(buffer), rt.live()));
}

Tensor tensor_from_data(BackendDataPtr data) {
  if (!data) throw Error("tensor_from_data: the buffer is null");
  if (reinterpret_cast<uintptr_t>(data->data()) % 64 != 0) {
    throw Error(fmt::format("tensor_from_data: the buffer of {} at {} is not 64-byte aligned", dtype_name(data->dtype()),
                            fmt::ptr(data->data())));
  }
  if (absl::Status status = ir::validate_dims("tensor_from_data", data->shape()); !status.ok()) fail(status);
  return Tensor(detail::TensorImpl::create(std::move(data), Runtime::get().live()));
}

BackendDataPtr tensor_data(const Tensor& t) {
  if (!t.defined()) throw Error("tensor_data: tensor is undefined");
  return materialized(t.impl());
}

detail::TensorImpl& Tensor::checked_impl(const char* op) const {
  if (!impl_) throw Error(fmt::format("{}: tensor is undefined", op));
  return *impl_;
}

std::vector<int64_t> Tensor::shape() const {
  auto s = checked_impl("shape").shape();
  return {s.begin(), s.end()};
}
int64_t Tensor::dim() const { return static_cast<int64_t>(checked_impl("dim").shape().size()); }
int64_t Tensor::numel() const { return numel_for("numel"); }
int64_t Tensor::numel_for(const char* op) const { return ir::numel(checked_impl(op).shape()); }
DType Tensor::dtype() const { return checked_impl("dtype").dtype(); }

std::string Tensor::to_string() const {
  if (!impl_) return "Tensor(undefined)";
  return fmt::format("Tensor({}{})", dtype_name(dtype()), ir::shape_to_string(impl_->shape()));
}

const void* Tensor::host_elements(const char* op, DType requested, bool copied_out,
                                  std::shared_ptr<const void>& keep) const {
  detail::TensorImpl& impl = checked_impl(op);
  if (impl.dtype() != requested) {
    throw Error(fmt::format("{}: tensor has dtype {}, asked for {} (convert with .to(DType) first)", op,
                            dtype_name(impl.dtype()), dtype_name(requested)));
  }
  BackendDataPtr held = materialized(impl_);
  if (copied_out) Runtime::get().counters().bytes_out.fetch_add(held->size_bytes(), std::memory_order_relaxed);
  const void* data = held->data();
  keep = std::move(held);
  return data;
}

bool Tensor::fits_in_host_memory(int64_t count, size_t element_size) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return true;
  return static_cast<double>(count) * static_cast<double>(element_size) <=
         static_cast<double>(pages) * static_cast<double>(page);
}

void Tensor::throw_out_of_host_memory(const char* op, size_t element_size) const {
  const detail::TensorImpl& impl = checked_impl(op);
  throw Error(fmt::format("{}: out of memory copying {}{} out ({} elements of {} bytes)", op, dtype_name(impl.dtype()),
                          ir::shape_to_string(impl.shape()), ir::numel(impl.shape()), element_size));
}

Scalar Tensor::item_scalar() const {
  detail::TensorImpl& impl = checked_impl("item");
  if (ir::numel(impl.shape()) != 1) {
    throw Error(fmt::format("item: tensor of shape {} has {} elements, not 1", ir::shape_to_string(impl.shape()),
                            ir::numel(impl.shape())));
  }
  const BackendDataPtr data = materialized(impl_);
  const void* p = data->data();
  switch (impl.dtype()) {
    case DType::Bool: return Scalar(*static_cast<const uint8_t*>(p) != 0);
    case DType::Int32: return Scalar(*static_cast<const int32_t*>(p));
    case DType::Int64: return Scalar(*static_cast<const int64_t*>(p));
    case DType::Float32: return Scalar(*static_cast<const float*>(p));
    case DType::Float64: return Scalar(*static_cast<const double*>(p));
  }
  return Scalar(0);
}

void Tensor::check_item_fits(Scalar value, DType requested) {
  if (absl::Status status = ir::check_scalar_fits("item", value, requested); !status.ok()) fail(status);
}

Tensor Tensor::to(DType dtype) const {
  return detail::make_pending(ir::make_cast(checked_impl("to").ir_value(), dtype));
}

namespace {

/// Replaces `self`'s value with `update`, which must keep its shape and dtype (as PyTorch's
/// in-place ops require: the result is cast back, but may not broadcast to a larger shape).
Tensor& assign(Tensor& self, const Tensor& update, const char* op) {
  detail::TensorImpl& impl = *self.impl();
  if (update.shape() != self.shape()) {
    throw Error(fmt::format("{}: result shape {} does not match the tensor's shape {}", op,
                            ir::shape_to_string(update.shape()), ir::shape_to_string(self.shape())));
  }
  auto category = [](DType d) { return is_floating(d) ? 2 : is_integral(d) ? 1 : 0; };
  if (category(update.dtype()) > category(self.dtype())) {
    throw Error(fmt::format("{}: result dtype {} cannot be stored in place into dtype {}", op,
                            dtype_name(update.dtype()), dtype_name(self.dtype())));
  }
  impl.set_ir(ir::make_cast(update.impl()->ir_value(), self.dtype()));
  return self;
}

}  // namespace

Tensor& Tensor::operator+=(const Tensor& other) {
  checked_impl("add_");
  if (!other.defined()) throw Error("add_: the other tensor is undefined");
  return assign(*this, *this + other, "add_");
}
Tensor& Tensor::operator-=(const Tensor& other) {
  checked_impl("sub_");
  if (!other.defined()) throw Error("sub_: the other tensor is undefined");
  return assign(*this, *this - other, "sub_");
}
Tensor& Tensor::operator*=(const Tensor& other) {
  checked_impl("mul_");
  if (!other.defined()) throw Error("mul_: the other tensor is undefined");
  return assign(*this, *this * other, "mul_");
}
Tensor& Tensor::operator/=(const Tensor& other) {
  checked_impl("div_");
  if (!other.defined()) throw Error("div_: the other tensor is undefined");
  return assign(*this, *this / other, "div_");
}
Tensor& Tensor::operator+=(Scalar other) { checked_impl("add_"); return assign(*this, *this + other, "add_"); }
Tensor& Tensor::operator-=(Scalar other) { checked_impl("sub_"); return assign(*this, *this - other, "sub_"); }
Tensor& Tensor::operator*=(Scalar other) { checked_impl("mul_"); return assign(*this, *this * other, "mul_"); }
Tensor& Tensor::operator/=(Scalar other) { checked_impl("div_"); return assign(*this, *this / other, "div_"); }

Tensor& Tensor::zero_() {
  detail::TensorImpl& impl = checked_impl("zero_");
  impl.set_ir(ir::make_scalar(ir::scalar_value(Scalar(0), impl.dtype()), impl.dtype(), impl.shape()));
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::TensorImpl& impl = checked_impl("copy_");
  if (!src.defined()) throw Error("copy_: source tensor is undefined");
  // Broadcast src to this shape: select from it under an all-true condition of this shape.
  ir::Shape shape(impl.shape().begin(), impl.shape().end());
  ir::NodePtr all = ir::make_scalar(ir::ScalarValue::of_int(1), DType::Bool, shape);
  ir::NodePtr value = ir::make_cast(src.impl()->ir_value(), impl.dtype());
  const ir::NodePtr operands[] = {all, value, value};
  absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(ir::OpKind::Where, operands);
  if (!node.ok() || (*node)->shape() != shape) {
    throw Error(fmt::format("copy_: source shape {} cannot be broadcast to {}", ir::shape_to_string(src.shape()),
                            ir::shape_to_string(shape)));
  }
  impl.set_ir(*std::move(node));
  return *this;
}

}  // namespace lazyjit
