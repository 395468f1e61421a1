#pragma once
/// \file
/// PyTorch's DistributedSampler in C++: the same semantics and, for N < 214,748,364, exactly the
/// same index order for any seed, epoch, world size, rank, shuffle and drop_last.

#include <cstdint>
#include <memory>
#include <vector>

#include "strider/sampling/sampler.hpp"
#include "strider/sampling/shared_order.hpp"

namespace strider {

/// How an epoch of N samples is split over ranks and into batches: torch's DistributedSampler
/// arguments plus batching. Declared once: the distributed sampler's config is exactly this, the
/// modes that hand out its positions through an order of their own (streaming, block) extend it,
/// and SamplerOptions carries it, so the six fields are copied as one.
struct PartitionConfig {
  std::int64_t dataset_size = 0;  ///< N, the number of samples in the dataset
  std::int64_t batch_size = 0;    ///< B, per rank (as in torch); 0: the whole epoch is one batch
  bool shuffle = true;            ///< torch's shuffle (what the order is shuffled with depends on the mode)
  bool drop_last = false;         ///< torch's drop_last: drop the tail so every rank gets floor(N/R)
  bool drop_last_batch = false;   ///< drop a last partial batch (separate from drop_last)
  std::int64_t seed = 0;          ///< the run's seed; with the epoch it keys the order
};

/// Configuration of the distributed sampler: the partition; shuffle is torch's randperm(N) seeded
/// with seed+epoch (modulo 2^64).
struct DistributedSamplerConfig : PartitionConfig {
  /// With shuffle: where the rank's positions of each epoch's order come from (the Loader's, made
  /// once per node); null: the sampler shuffles all N itself. The batches are the same either way.
  std::shared_ptr<SharedOrder> shared_order;
};

/// Rank r of R takes positions r, r+R, r+2R, ... of the epoch's order, padded (by repeating the
/// order from its start) to ceil(N/R)*R or truncated to floor(N/R)*R with drop_last, then cut into
/// batches of B. Global batch k (the union of every rank's k-th batch) is positions
/// [k*R*B, (k+1)*R*B) of the order: the same set for any R with the same R*B.
/// With shuffle, set_epoch materialises the order (8N bytes), or with a shared order only this
/// rank's positions (8N/R bytes); without shuffle nothing of size N exists.
class DistributedSampler final : public Sampler {
 public:
  /// Throws UsageError for N < 0, B < 0, world_size <= 0 or rank outside [0, world_size).
  DistributedSampler(const DistributedSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "distributed"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new DistributedSampler(*this)); }
  std::int64_t num_steps() const override { return num_steps_; }
  std::int64_t max_batch_size() const override;
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::int64_t consumed_after(std::int64_t steps) const override;
  std::int64_t step_for_consumed(std::int64_t consumed) const override;
  std::int64_t global_batch_size() const override;
  std::uint64_t config_hash() const override;

  /// Samples per rank per epoch: ceil(N/R), or floor(N/R) with drop_last.
  std::int64_t samples_per_rank() const noexcept { return samples_per_rank_; }
  /// samples_per_rank * R (uint64: it can exceed 2^63 - 1 only by less than R).
  std::uint64_t total_size() const noexcept { return total_size_; }
  /// The global index at this rank's position (0 <= position < samples_per_rank()). O(1).
  std::int64_t index_at(std::int64_t position) const;
  /// The effective per-rank batch size (samples_per_rank when config.batch_size is 0).
  std::int64_t batch_size() const noexcept { return batch_size_; }
  const DistributedSamplerConfig& config() const noexcept { return config_; }

 private:
  void on_epoch() override;

  DistributedSamplerConfig config_;
  std::int64_t samples_per_rank_ = 0;
  std::uint64_t total_size_ = 0;
  std::int64_t batch_size_ = 0;
  std::int64_t num_steps_ = 0;
  bool positions_only_ = false;      // shuffle with a shared order: mine_ holds this rank's positions
  std::vector<std::int64_t> order_;  // the epoch's permutation (shuffle without a shared order)
  std::vector<std::int64_t> mine_;   // this rank's positions of it (positions_only_)
};

}  // namespace strider
