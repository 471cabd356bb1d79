// The NVPTX target (DESIGN.md section 7): a kernel's IR as a PTX kernel. No GPU and no CUDA
// toolkit are needed to make PTX; the runtime hands it to the CUDA driver.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::codegen {

/// The GPU the PTX is for: its compute capability and the PTX ISA version (the driver must
/// know it: PTX 8.0 needs CUDA 12.0's driver or later).
struct GpuArch {
  std::string sm = "sm_90";
  std::string ptx = "ptx80";
};

/// The PTX kernel ABI. Entry `lj_<hash>` takes the frame's buffers (global pointers, in slot
/// order), then the scalar frame if the kernel reads scalars, then the dims (global int64s),
/// the parallel loop's iteration count (int64) and a status word (a global int32, zero at
/// launch). Its threads stride over the iterations, running the kernel body on [i, i + 1);
/// the first failing check's code is left in the status word (its offending value is in the
/// check's status buffer, as on the CPU), and that thread stops.
inline constexpr int kPtxAbiVersion = 1;

/// The PTX of one kernel, or an error saying why it could not be made.
absl::StatusOr<std::string> compile_ptx(const lowering::LoweredKernel& kernel, const GpuArch& arch = {});

/// The PTX of every kernel of a lowered graph, one module after another (`--emit=ptx`).
absl::StatusOr<std::string> ptx_text(const lowering::LoweredGraph& lowered, const GpuArch& arch = {});

}  // namespace lazyjit::codegen
