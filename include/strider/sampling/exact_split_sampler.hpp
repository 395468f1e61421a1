#pragma once
/// \file
/// The evaluation split: every sample exactly once, no padding, in index order per rank. Rank r of
/// R takes r, r+R, r+2R, ... < N in batches of B. Not a training mode (make_sampler does not build
/// it): ranks may get different numbers of steps, so a caller must not run a collective per step.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/sampling/sampler.hpp"

namespace strider {

/// Every sample of [0, N) exactly once over all ranks. Every epoch has the same plan. Pure.
class ExactSplitSampler final : public Sampler {
 public:
  /// `batch_size` samples per step (0: this rank's whole share is one batch). Throws UsageError for
  /// N < 0, B < 0, world_size <= 0 or rank outside [0, world_size).
  ExactSplitSampler(std::int64_t dataset_size, std::int64_t batch_size, int world_size, int rank);

  std::string mode() const override { return "exact"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new ExactSplitSampler(*this)); }
  /// Steps of this rank (ranks may differ by one).
  std::int64_t num_steps() const override;
  std::int64_t max_batch_size() const override;
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  /// This rank's samples after `steps` steps (the split has no global batch).
  std::int64_t consumed_after(std::int64_t steps) const override;
  std::int64_t step_for_consumed(std::int64_t consumed) const override;
  std::int64_t global_batch_size() const override { return 0; }
  std::uint64_t config_hash() const override;

  /// The samples this rank gets: ceil((N - rank) / R).
  std::int64_t samples_of_rank() const noexcept { return mine_; }

 private:
  void on_epoch() override {}

  std::int64_t dataset_size_;
  std::int64_t batch_size_ = 1;
  std::int64_t mine_ = 0;
};

}  // namespace strider
