// Set-up of the optional peers, each defined in its own file and built when CMake finds it.
#pragma once

namespace bench {

/// bench_torch.cpp: libtorch on kHandThreads threads, LTC's TorchScript backend; prints the setting.
void torch_setup();
/// bench_eigen.cpp: prints the setting of the Eigen rows.
void eigen_setup();

}  // namespace bench
