#pragma once
/// \file
/// The streaming sampler: the distributed sampler's partition over a keyed permutation instead of a
/// materialised one, so that nothing of size N exists for any N < 2^63.

#include <cstdint>
#include <vector>

#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/feistel_permutation.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

/// Configuration of the streaming sampler (the distributed sampler's options).
struct StreamingSamplerConfig {
  std::int64_t dataset_size = 0;  ///< N, any value in [0, 2^63)
  std::int64_t batch_size = 0;    ///< B, per rank; 0: the whole epoch is one batch
  bool shuffle = true;            ///< false: the dataset order (then equal to the distributed sampler)
  bool drop_last = false;         ///< drop the tail so every rank gets floor(N/R)
  bool drop_last_batch = false;   ///< drop a last partial batch
  std::int64_t seed = 0;          ///< with the epoch, keys the permutation (derive_seed)
};

/// The epoch's order is a FeistelPermutation of [0, N) keyed by (seed, epoch); ranks take positions
/// of it exactly as in DistributedSampler (rank r: r, r+R, ...; padded by wrapping or truncated with
/// drop_last; global batch k is positions [kRB, (k+1)RB) for any R). Not torch's order. O(1) memory,
/// O(1) set_epoch and resume, O(B) per batch.
class StreamingSampler final : public Sampler {
 public:
  /// Throws UsageError for N < 0, B < 0, world_size <= 0 or rank outside [0, world_size).
  StreamingSampler(const StreamingSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "streaming"; }
  std::int64_t num_steps() const override { return partition_.num_steps(); }
  std::int64_t max_batch_size() const override { return partition_.max_batch_size(); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::int64_t consumed_after(std::int64_t steps) const override { return partition_.consumed_after(steps); }
  std::int64_t step_for_consumed(std::int64_t consumed) const override { return partition_.step_for_consumed(consumed); }
  std::int64_t global_batch_size() const override { return partition_.global_batch_size(); }
  std::uint64_t config_hash() const override;

  /// Samples per rank per epoch: ceil(N/R), or floor(N/R) with drop_last.
  std::int64_t samples_per_rank() const noexcept { return partition_.samples_per_rank(); }
  /// The global index at this rank's position (0 <= position < samples_per_rank()). O(1).
  std::int64_t index_at(std::int64_t position) const;
  /// The epoch's permutation of [0, N) (identity-free only with shuffle).
  const FeistelPermutation& permutation() const noexcept { return permutation_; }

 private:
  void on_epoch() override;

  StreamingSamplerConfig config_;
  DistributedSampler partition_;  // unshuffled: its indices are positions of the epoch's order
  FeistelPermutation permutation_;
};

}  // namespace strider
