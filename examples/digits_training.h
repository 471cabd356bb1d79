// What the digits examples share: the fixed split and batch order, batches as tensors, the
// training loop in PyTorch's style (forward, backward, optimizer step, mark_step), the test
// accuracy, and the checks of what the step barrier promises (no recompiles, every update in
// place). digits_mlp and digits_cnn differ only in their model.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "digits_data.h"

namespace digits {

using lazyjit::Tensor;

/// A model: images [n, 64] (pixels in [0, 1]) to logits [n, 10].
using Forward = std::function<Tensor(const Tensor&)>;

struct Options {
  int64_t batch = 64;
  int epochs = 15;
  double min_accuracy = 0.95;
};

struct Batch {
  Tensor x;  ///< [n, 64] float32
  Tensor y;  ///< [n] int64
};

/// The rows `rows` of `data` as tensors.
Batch gather(const DigitsData& data, std::span<const int64_t> rows);

/// The counters the checks read, as differences between two snapshots.
struct Counters {
  int64_t graphs_executed = 0;
  int64_t compiles = 0;
  int64_t cache_hits = 0;
  int64_t donations = 0;
  int64_t bytes_allocated = 0;
};

struct TrainingRun {
  int64_t steps = 0;
  double seconds = 0;
  Counters total;        ///< over the whole loop
  Counters steady_step;  ///< over the first step of the last epoch, loss read back included
};

/// 80% of a seeded permutation of the rows for training, the rest for testing.
struct Split {
  std::vector<int64_t> train, test;
};
Split fixed_split(int64_t rows);

/// Trains `model` with `opt` on the rows `train`, printing the mean loss of each epoch.
TrainingRun train(const Forward& model, lazyjit::optim::Optimizer& opt, const DigitsData& data,
                  std::vector<int64_t> train, const Options& options);

/// The fraction of the rows `test` whose argmax of the logits is the label, in one forward pass.
double test_accuracy(const Forward& model, const DigitsData& data, const std::vector<int64_t>& test);

/// Trains `model` on the split's training rows, tests it, prints the accuracy, lazyjit's metrics
/// and the checks; returns the exit code (1 when a check fails).
int train_and_report(const Forward& model, lazyjit::optim::Adam& opt, const DigitsData& data, const Split& split,
                     const Options& options);

/// Prints one line per promise the examples check; returns whether all hold.
bool print_checks(const TrainingRun& run, double accuracy, int64_t params, int64_t state_buffers, double min_accuracy);

/// An example's main: parses --data=PATH, loads the data set (explaining how to install it
/// when it is missing), and runs `body` on it, turning a lazyjit::Error into exit code 1.
int run_main(int argc, char** argv, const char* program, const std::function<int(const DigitsData&)>& body);

}  // namespace digits
