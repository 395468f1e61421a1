#pragma once
/// \file
/// The block sampler: shuffled blocks of contiguous samples dealt whole to ranks, so that each
/// rank's reads stay near-sequential. O(1) memory for any N < 2^63.

#include <cstdint>
#include <memory>
#include <vector>

#include "strider/sampling/feistel_permutation.hpp"
#include "strider/sampling/partitioned_sampler.hpp"

namespace strider {

/// Configuration of the block sampler: the distributed sampler's partition (N may be any value in
/// [0, 2^63); shuffle false: the dataset order, cut into contiguous per-rank ranges) and the blocks.
struct BlockSamplerConfig : PartitionConfig {
  std::int64_t block_size = 0;    ///< S: contiguous samples per block (> 0)
  std::int64_t block_window = 8;  ///< W: a rank's samples are shuffled within windows of W*S positions
  /// false: the blocks stay in storage order (rank r reads [r*M, (r+1)*M) every epoch); only the
  /// windows are shuffled. With S = M and W = 1: each rank's own block, shuffled inside, which is
  /// what MLPerf Storage's DLIO reads.
  bool shuffle_blocks = true;
};

/// The epoch's order is the N/S full blocks [jS, (j+1)S) in a keyed random order (a
/// FeistelPermutation of the blocks), followed by the partial tail block, which stays last.
/// Rank r takes the contiguous range [r*M, (r+1)*M) of that order, M = ceil(N/R) (floor with
/// drop_last), wrapping to its start for padding, exactly as many samples as the distributed
/// sampler gives; so each rank reads whole blocks but for at most two split at its range's ends.
/// Within each window of W*S consecutive positions of its range, a rank's samples are shuffled
/// (a FeistelPermutation per window), so a window's reads touch at most W+1 blocks.
///
/// The randomness traded: samples of one block always travel together, within one window of one
/// rank, so a batch mixes at most W+1 blocks instead of the whole dataset; a dataset stored in a
/// meaningful order (by class, source or time) gives correlated batches unless S is small or W
/// large. Which rank reads a block, and when, is random; the tail block is always last.
/// Resume is O(1) and exact at the same world size; the plan depends on R beyond R*B, so the
/// configuration hash includes R and resuming at another world size is refused.
class BlockSampler final : public PartitionedSampler {
 public:
  /// Throws UsageError for N < 0, B < 0, block_size < 1, block_window < 1, or a bad world size or rank.
  BlockSampler(const BlockSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "block"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new BlockSampler(*this)); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::uint64_t config_hash() const override;

  /// The global index at this rank's position (0 <= position < samples_per_rank()). O(1).
  std::int64_t index_at(std::int64_t position) const;

 private:
  void on_epoch() override;
  // Positions [first, first+count) of this rank's range, window-shuffled, as positions of the order.
  void order_positions(std::int64_t first, std::int64_t count, std::int64_t* out) const;
  // Positions of the order (each < N) to sample indices, in place.
  void samples_at(std::int64_t* positions, std::size_t count) const;

  BlockSamplerConfig config_;
  std::int64_t full_blocks_ = 0;          // N / S
  std::int64_t window_size_ = 0;          // W * S positions (saturated)
  FeistelPermutation block_order_;        // over the full blocks
  FeistelPermutation window_order_;       // within a full window
  FeistelPermutation last_window_order_;  // within the rank's last, shorter window
};

}  // namespace strider
