#include "strider/sampling/exact_split_sampler.hpp"

#include <algorithm>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"

namespace strider {

ExactSplitSampler::ExactSplitSampler(std::int64_t dataset_size, std::int64_t batch_size, int world_size, int rank)
    : Sampler(world_size, rank, 0), dataset_size_(dataset_size) {
  if (dataset_size < 0) STRIDER_THROW(UsageError, "dataset size must be >= 0, got " + std::to_string(dataset_size));
  if (batch_size < 0) STRIDER_THROW(UsageError, "batch size must be >= 0, got " + std::to_string(batch_size));
  mine_ = dataset_size > rank ? (dataset_size - rank + world_size - 1) / world_size : 0;
  batch_size_ = batch_size > 0 ? batch_size : std::max<std::int64_t>(mine_, 1);
}

std::int64_t ExactSplitSampler::num_steps() const {
  return (mine_ + batch_size_ - 1) / batch_size_;
}

std::int64_t ExactSplitSampler::max_batch_size() const {
  return std::min(batch_size_, mine_);
}

void ExactSplitSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  const std::int64_t first = step * batch_size_, count = std::min(batch_size_, mine_ - first);
  indices.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) indices[static_cast<std::size_t>(i)] = (first + i) * world_size() + rank();
}

std::int64_t ExactSplitSampler::consumed_after(std::int64_t steps) const {
  return std::min(steps * batch_size_, mine_);
}

std::int64_t ExactSplitSampler::step_for_consumed(std::int64_t consumed) const {
  if (consumed == mine_) return num_steps();
  if (consumed < 0 || consumed % batch_size_ != 0 || consumed > mine_)
    STRIDER_THROW(UsageError, "no step boundary at sample " + std::to_string(consumed) + " of this rank's " +
                                  std::to_string(mine_) + " in batches of " + std::to_string(batch_size_));
  return consumed / batch_size_;
}

std::uint64_t ExactSplitSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(dataset_size_);
  hash.add(batch_size_);
  return hash.value();
}

}  // namespace strider
