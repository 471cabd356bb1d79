// Set-up of the optional peers, each defined in its own file and built when CMake finds it.
#pragma once

#include <string>

namespace bench {

/// bench_torch.cpp: libtorch on kHandThreads threads, LTC's TorchScript backend; prints the setting.
void torch_setup();
/// Set to a workload (or "workload:eager") in the environment of a process that main hands to
/// torch_cold_step.
inline constexpr const char* kColdStepEnv = "LAZYJIT_BENCH_LTC_COLD_STEP";
/// bench_torch.cpp, in a fresh process: runs the workload's step once eagerly and one unrelated
/// lazy graph (kernels, threads, allocator and LTC started), then prints the seconds of its
/// first lazy step, the median of 5 steady ones and the excess of the 5 steps in between over
/// 5 steady ones; for "workload:eager", the same for its eager steps with nothing run before.
/// Prints the error and returns 1 on failure.
int torch_cold_step(const std::string& spec);
/// bench_eigen.cpp: prints the setting of the Eigen rows.
void eigen_setup();

}  // namespace bench
