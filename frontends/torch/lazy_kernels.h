// Lazy kernels of lazyjit's own for the aten ops PyTorch 1.13 runs on eager CPU (lazy_kernels.cpp).
#pragma once

namespace lazyjit::ltc {

/// Registers them for the Lazy dispatch key. Idempotent.
void register_lazy_kernels();

/// Called when a meta kernel written in Python (a decomposition) raised and its op fell back
/// to eager: the Python module clears the error Python still holds (this library has no
/// Python of its own). Unset outside Python.
void set_python_error_reset(void (*reset)());

}  // namespace lazyjit::ltc
