#include "strider/sampling/distributed_sampler.hpp"

#include <algorithm>
#include <limits>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/random.hpp"

namespace strider {

DistributedSampler::DistributedSampler(const DistributedSamplerConfig& config, int world_size, int rank)
    : Sampler(world_size, rank, config.seed), config_(config) {
  if (config.dataset_size < 0)
    STRIDER_THROW(UsageError, "dataset size must be >= 0, got " + std::to_string(config.dataset_size));
  if (config.batch_size < 0)
    STRIDER_THROW(UsageError, "batch size must be >= 0, got " + std::to_string(config.batch_size));
  const std::int64_t n = config.dataset_size, r = world_size;
  // ceil(N/R) without overflow for N near 2^63.
  samples_per_rank_ = config.drop_last ? n / r : n / r + (n % r != 0 ? 1 : 0);
  total_size_ = static_cast<std::uint64_t>(samples_per_rank_) * static_cast<std::uint64_t>(r);
  if (n == 0) samples_per_rank_ = 0, total_size_ = 0;
  batch_size_ = config.batch_size > 0 ? config.batch_size : std::max<std::int64_t>(samples_per_rank_, 1);
  num_steps_ = config.drop_last_batch
                   ? samples_per_rank_ / batch_size_
                   : samples_per_rank_ / batch_size_ + (samples_per_rank_ % batch_size_ != 0 ? 1 : 0);
  positions_only_ = config.shuffle && config.shared_order != nullptr;
  on_epoch();
}

void DistributedSampler::on_epoch() {
  if (!config_.shuffle) return;
  try {
    if (positions_only_) {
      mine_.resize(static_cast<std::size_t>(samples_per_rank_));
      if (samples_per_rank_ > 0)
        config_.shared_order->take(config_.dataset_size, epoch_seed(seed(), epoch()),
                                   static_cast<std::uint64_t>(rank()), static_cast<std::uint64_t>(world_size()),
                                   samples_per_rank_, mine_.data());
    } else {
      torch_randperm(config_.dataset_size, epoch_seed(seed(), epoch()), order_);  // order_'s memory reused
    }
  } catch (const std::bad_alloc&) {
    STRIDER_THROW(UsageError, "cannot hold a shuffled order of " + std::to_string(config_.dataset_size) +
                                  " samples in memory; use the streaming sampler for datasets this large");
  }
}

std::int64_t DistributedSampler::max_batch_size() const {
  return std::min(batch_size_, samples_per_rank_);
}

std::int64_t DistributedSampler::index_at(std::int64_t position) const {
  if (positions_only_) return mine_[static_cast<std::size_t>(position)];
  // Global position in the padded order; it can exceed 2^63 - 1 only for N within R of 2^63.
  const std::uint64_t global = static_cast<std::uint64_t>(position) * static_cast<std::uint64_t>(world_size()) +
                               static_cast<std::uint64_t>(rank());
  const auto wrapped = static_cast<std::int64_t>(global % static_cast<std::uint64_t>(config_.dataset_size));
  return config_.shuffle ? order_[static_cast<std::size_t>(wrapped)] : wrapped;
}

void DistributedSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  const std::int64_t first = step * batch_size_;
  const std::int64_t last = first + std::min(batch_size_, samples_per_rank_ - first);  // no overflow near 2^63
  indices.resize(static_cast<std::size_t>(last - first));
  if (last == first) return;
  if (positions_only_) {
    std::copy(mine_.begin() + first, mine_.begin() + last, indices.begin());
    return;
  }
  // index_at's wrapped global position, stepped by R instead of a 64-bit division per index.
  const auto n = static_cast<std::uint64_t>(config_.dataset_size);
  const auto stride = static_cast<std::uint64_t>(world_size());
  std::uint64_t wrapped =
      (static_cast<std::uint64_t>(first) * stride + static_cast<std::uint64_t>(rank())) % n;  // as index_at
  const std::int64_t* order = config_.shuffle ? order_.data() : nullptr;
  const auto count = static_cast<std::uint64_t>(last - first);
  if (wrapped + (count - 1) * stride < n) {  // no wrap-around within the batch (all but a padded tail)
    std::int64_t* out = indices.data();
    if (order != nullptr) {
      const std::int64_t* from = order + wrapped;
      if (stride == 1) {
        std::copy(from, from + count, out);
      } else {
        for (std::uint64_t k = 0; k < count; ++k) out[k] = from[k * stride];
      }
    } else {
      for (std::uint64_t k = 0; k < count; ++k) out[k] = static_cast<std::int64_t>(wrapped + k * stride);
    }
    return;
  }
  for (std::int64_t position = first; position < last; ++position) {
    indices[static_cast<std::size_t>(position - first)] =
        order != nullptr ? order[wrapped] : static_cast<std::int64_t>(wrapped);
    wrapped += stride;  // < n + R: no overflow, n < 2^63
    while (wrapped >= n) wrapped -= n;
  }
}

void take_positions(const std::int64_t* order, std::int64_t n, std::uint64_t first, std::uint64_t stride,
                    std::int64_t count, std::int64_t* out) noexcept {
  const auto size = static_cast<std::uint64_t>(n);
  std::uint64_t at = first % size;
  stride %= size;  // the same positions modulo n, and no overflow below
  for (std::int64_t k = 0; k < count; ++k) {
    out[k] = order[at];
    at += stride;  // < 2n
    if (at >= size) at -= size;
  }
}

std::int64_t DistributedSampler::global_batch_size() const {
  return batch_size_ * world_size();
}

std::int64_t DistributedSampler::consumed_after(std::int64_t steps) const {
  // Unsigned: for N near 2^63 the padded total exceeds INT64_MAX by less than R; saturate there.
  const std::uint64_t clamped_steps = static_cast<std::uint64_t>(std::clamp<std::int64_t>(steps, 0, num_steps_));
  const std::uint64_t consumed = std::min(
      total_size_, clamped_steps * static_cast<std::uint64_t>(batch_size_) * static_cast<std::uint64_t>(world_size()));
  return static_cast<std::int64_t>(std::min<std::uint64_t>(consumed, std::numeric_limits<std::int64_t>::max()));
}

std::int64_t DistributedSampler::step_for_consumed(std::int64_t consumed) const {
  const std::int64_t global_batch = global_batch_size();
  if (consumed == consumed_after(num_steps_)) return num_steps_;
  if (consumed < 0 || consumed % global_batch != 0 || consumed / global_batch > num_steps_)
    STRIDER_THROW(UsageError, "no step boundary at global sample " + std::to_string(consumed) +
                                  " for a global batch of " + std::to_string(global_batch) + " and " +
                                  std::to_string(num_steps_) + " steps");
  return consumed / global_batch;
}

std::uint64_t DistributedSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(config_.dataset_size);
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  hash.add(static_cast<std::uint8_t>(config_.drop_last));
  hash.add(static_cast<std::uint8_t>(config_.drop_last_batch));
  hash.add(config_.seed);
  return hash.value();
}

}  // namespace strider
