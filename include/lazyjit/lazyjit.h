// lazyjit: a JIT backend for lazy tensor programs. Include this header.
#pragma once

#include "lazyjit/autograd.h"   // IWYU pragma: export
#include "lazyjit/backend.h"    // IWYU pragma: export
#include "lazyjit/collectives.h"  // IWYU pragma: export
#include "lazyjit/dtype.h"      // IWYU pragma: export
#include "lazyjit/error.h"      // IWYU pragma: export
#include "lazyjit/nn.h"         // IWYU pragma: export
#include "lazyjit/ops.h"        // IWYU pragma: export
#include "lazyjit/optim.h"      // IWYU pragma: export
#include "lazyjit/runtime.h"    // IWYU pragma: export
#include "lazyjit/scalar.h"     // IWYU pragma: export
#include "lazyjit/tensor.h"     // IWYU pragma: export
