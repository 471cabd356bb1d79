// Lazy kernels of lazyjit's own for the aten ops PyTorch 1.13 runs on eager CPU (lazy_kernels.cpp).
#pragma once

namespace lazyjit::ltc {

/// Registers them for the Lazy dispatch key. Idempotent.
void register_lazy_kernels();

}  // namespace lazyjit::ltc
