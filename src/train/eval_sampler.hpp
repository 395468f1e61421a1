#pragma once
// The evaluation plan: every sample exactly once, no padding. Rank r takes r, r+R, r+2R, ... < N in
// batches of B. Ranks may get different numbers of steps, so evaluation does no collective per step
// (only one all-reduce of the counts at the end). Internal to the trainer; not a sampling mode.

#include <algorithm>

#include "strider/sampling/sampler.hpp"

namespace strider::detail {

class EvalSampler final : public Sampler {
 public:
  EvalSampler(std::int64_t dataset_size, std::int64_t batch_size, int world_size, int rank)
      : Sampler(world_size, rank, 0), dataset_size_(dataset_size), batch_size_(std::max<std::int64_t>(batch_size, 1)) {
    mine_ = dataset_size > rank ? (dataset_size - rank + world_size - 1) / world_size : 0;
  }
  std::string mode() const override { return "eval"; }
  std::int64_t num_steps() const override { return (mine_ + batch_size_ - 1) / batch_size_; }
  std::int64_t max_batch_size() const override { return std::min(batch_size_, mine_); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override {
    check_step(step);
    const std::int64_t first = step * batch_size_, count = std::min(batch_size_, mine_ - first);
    indices.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) indices[static_cast<std::size_t>(i)] = (first + i) * world_size() + rank();
  }
  std::int64_t consumed_after(std::int64_t steps) const override { return std::min(steps * batch_size_, mine_); }
  std::int64_t step_for_consumed(std::int64_t consumed) const override { return consumed / batch_size_; }
  std::int64_t global_batch_size() const override { return 0; }
  std::uint64_t config_hash() const override { return static_cast<std::uint64_t>(dataset_size_); }

 private:
  void on_epoch() override {}
  std::int64_t dataset_size_, batch_size_, mine_ = 0;
};

}  // namespace strider::detail
