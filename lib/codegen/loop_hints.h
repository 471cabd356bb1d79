// Which of a kernel's loops the vectoriser masks: one masked vector loop instead of a vector
// loop, a narrower vector epilogue and a scalar remainder.
#pragma once

#include "lowering/kir.h"

namespace lazyjit::codegen {

/// Whether the vectoriser should fold the tail of loop `s` of `kernel` into masked vector
/// iterations (llvm.loop.vectorize.predicate.enable): an innermost loop without a fold whose
/// stores compute many ops and call no math function (an optimiser's update of 15
/// parameters: one loop of 55 buffers, the largest kernel of a GPT step). Masking saves
/// compiling the body three times and costs each iteration a few instructions (the lanes'
/// mask), and where a call clobbers every vector register, the spills of the mask and the
/// loop's constants around it: exp and tanh over 2^24 floats ran about 10% slower masked,
/// softmax's rows 10-60%. A fold's loop keeps its interleaved accumulators.
bool folds_tail(const kir::Kernel& kernel, const kir::Stmt& s);

}  // namespace lazyjit::codegen
