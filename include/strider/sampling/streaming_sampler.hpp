#pragma once
/// \file
/// The streaming sampler: the distributed sampler's partition over a keyed permutation instead of a
/// materialised one, so that nothing of size N exists for any N < 2^63.

#include <cstdint>
#include <memory>
#include <vector>

#include "strider/sampling/feistel_permutation.hpp"
#include "strider/sampling/partitioned_sampler.hpp"

namespace strider {

/// Configuration of the streaming sampler: the distributed sampler's partition (N may be any value
/// in [0, 2^63); shuffle false gives the dataset order, then equal to the distributed sampler's;
/// the seed with the epoch keys the permutation, derive_seed).
struct StreamingSamplerConfig : PartitionConfig {};

/// The epoch's order is a FeistelPermutation of [0, N) keyed by (seed, epoch); ranks take positions
/// of it exactly as in DistributedSampler (rank r: r, r+R, ...; padded by wrapping or truncated with
/// drop_last; global batch k is positions [kRB, (k+1)RB) for any R). Not torch's order. O(1) memory,
/// O(1) set_epoch and resume, O(B) per batch.
class StreamingSampler final : public PartitionedSampler {
 public:
  /// Throws UsageError for N < 0, B < 0, world_size <= 0 or rank outside [0, world_size).
  StreamingSampler(const StreamingSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "streaming"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new StreamingSampler(*this)); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::uint64_t config_hash() const override;

  /// The global index at this rank's position (0 <= position < samples_per_rank()). O(1).
  std::int64_t index_at(std::int64_t position) const;
  /// The epoch's permutation of [0, N) (empty and unused without shuffle).
  const FeistelPermutation& permutation() const noexcept { return permutation_; }

 private:
  void on_epoch() override;

  StreamingSamplerConfig config_;
  FeistelPermutation permutation_;
};

}  // namespace strider
