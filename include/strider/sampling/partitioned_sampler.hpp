#pragma once
/// \file
/// The common base of the modes that hand out the distributed sampler's positions through an order
/// of their own (streaming, block).

#include <cstdint>

#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

/// A sampler whose counts are exactly DistributedSampler's: ceil(N/R) samples per rank (floor with
/// drop_last), batches of B, padding by wrapping, global samples consumed = steps * R * B, and
/// resume in O(1). A derived mode decides only which index each position holds.
class PartitionedSampler : public Sampler {
 public:
  std::int64_t num_steps() const override { return partition_.num_steps(); }
  std::int64_t max_batch_size() const override { return partition_.max_batch_size(); }
  std::int64_t consumed_after(std::int64_t steps) const override { return partition_.consumed_after(steps); }
  std::int64_t step_for_consumed(std::int64_t consumed) const override {
    return partition_.step_for_consumed(consumed);
  }
  std::int64_t global_batch_size() const override { return partition_.global_batch_size(); }

  /// Samples per rank per epoch: ceil(N/R), or floor(N/R) with drop_last.
  std::int64_t samples_per_rank() const noexcept { return partition_.samples_per_rank(); }

 protected:
  /// The partition of `config` (a StreamingSamplerConfig, BlockSamplerConfig, ...). Throws
  /// UsageError as DistributedSampler does.
  PartitionedSampler(const PartitionConfig& config, int world_size, int rank)
      : Sampler(world_size, rank, config.seed), partition_(unshuffled(config), world_size, rank) {}

  /// The unshuffled partition: its index_at and batch give positions of the mode's order (wrapped
  /// for padding); its config_hash covers N, drop_last, drop_last_batch and the seed.
  const DistributedSampler& partition() const noexcept { return partition_; }

 private:
  static DistributedSamplerConfig unshuffled(const PartitionConfig& config) {
    DistributedSamplerConfig partition;
    static_cast<PartitionConfig&>(partition) = config;
    partition.shuffle = false;
    return partition;
  }

  DistributedSampler partition_;
};

}  // namespace strider
