// Set-up of the optional peers, each defined in its own file and built when CMake finds it.
#pragma once

#include <functional>
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
/// Set to "peer:workload:steps" in the environment of a process that main hands to
/// first_steps_child (bench_first_steps.cpp): a user's first steps in a fresh process.
inline constexpr const char* kFirstStepsEnv = "LAZYJIT_BENCH_FIRST_STEPS";
/// bench_first_steps.cpp, in a fresh process: sets up the workload for lazyjit (tier from
/// LAZYJIT_TIER) or hands it to torch_first_steps, then prints the seconds of each step.
int first_steps_child(const std::string& spec);
/// bench_torch.cpp, in a fresh process: the same for "eager" or "lazy" (LTC), nothing run before.
int torch_first_steps(const std::string& peer, const std::string& workload, int steps);
/// A first_steps child's output: sets a step up with `make`, runs it `steps` times and prints
/// the seconds of each on one line; prints the error and returns 1 if anything throws.
int print_step_seconds(const std::function<std::function<void()>()>& make, int steps);
/// bench_eigen.cpp: prints the setting of the Eigen rows.
void eigen_setup();

}  // namespace bench
