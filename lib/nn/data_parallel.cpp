// Data parallelism (nn::DataParallel) and the data set's shards (nn::shard_indices).
#include <numeric>
#include <random>

#include "fmt/format.h"
#include "lazyjit/collectives.h"
#include "lazyjit/error.h"
#include "lazyjit/nn.h"

namespace lazyjit::nn {

DataParallel::DataParallel(std::vector<Tensor> params, int64_t bucket_bytes)
    : params_(std::move(params)), bucket_bytes_(bucket_bytes) {
  if (bucket_bytes_ < 1) throw Error(fmt::format("DataParallel: bucket_bytes {} must be positive", bucket_bytes_));
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined()) throw Error(fmt::format("DataParallel: parameter {} is undefined", i));
    params_[i].copy_(dist::broadcast(params_[i], 0));
  }
}

std::vector<Tensor> DataParallel::average(const std::vector<Tensor>& grads) const {
  if (grads.size() != params_.size()) {
    throw Error(fmt::format("DataParallel::average: expected {} gradients (one per parameter), got {}", params_.size(),
                            grads.size()));
  }
  // Buckets, last parameter first: consecutive gradients of one dtype up to bucket_bytes.
  buckets_.clear();
  int64_t bytes = 0;
  for (size_t i = grads.size(); i-- > 0;) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (g.shape() != params_[i].shape()) {
      throw Error(fmt::format("DataParallel::average: gradient {} has shape [{}], its parameter [{}]", i,
                              fmt::join(g.shape(), ", "), fmt::join(params_[i].shape(), ", ")));
    }
    const int64_t size = g.numel() * dtype_size(g.dtype());
    const bool fits = !buckets_.empty() && grads[buckets_.back().front()].dtype() == g.dtype() && bytes + size <= bucket_bytes_;
    if (!fits) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(i);
    bytes += size;
  }
  std::vector<Tensor> mean(grads.size());
  for (const std::vector<size_t>& bucket : buckets_) {
    std::vector<Tensor> flat;
    for (size_t i : bucket) flat.push_back(reshape(grads[i], {-1}));
    const Tensor reduced = dist::all_reduce(flat.size() == 1 ? flat[0] : cat(flat, 0), dist::ReduceOp::Mean);
    int64_t offset = 0;
    for (size_t i : bucket) {
      const int64_t n = grads[i].numel();
      mean[i] = reshape(slice(reduced, 0, offset, offset + n), grads[i].shape());
      offset += n;
    }
  }
  return mean;
}

void DataParallel::average_grads() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  const std::vector<Tensor> mean = average(grads);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (mean[i].defined()) params_[i].grad().copy_(mean[i]);
  }
}

std::vector<int64_t> shard_indices(int64_t size, int rank, int world, uint64_t epoch, bool shuffle, uint64_t seed) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw Error(fmt::format("shard_indices: rank {} is not a rank of a world of {}", rank, world));
  }
  if (size < 1) throw Error(fmt::format("shard_indices: the data set has {} examples", size));
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) {
    std::mt19937_64 rng(seed + epoch);
    for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates: the same on every library
      std::swap(order[i - 1], order[static_cast<size_t>(rng() % i)]);
    }
  }
  const int64_t per_rank = (size + world - 1) / world;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) mine.push_back(order[static_cast<size_t>((k * world + rank) % size)]);
  return mine;
}

}  // namespace lazyjit::nn
