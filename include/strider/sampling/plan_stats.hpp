#pragma once
/// \file
/// How much of a plan's compute goes to padding, and how evenly its steps load the ranks.

#include <cstdint>

#include "strider/sampling/factory.hpp"

namespace strider {

/// Padding and balance of one epoch over every rank. A batch costs count * its longest length
/// (tokens, padding included); padding repeats count like any other batch.
struct PlanStats {
  double padding_efficiency = 1;    ///< real tokens / padded tokens over every batch of every rank
  double step_imbalance = 1;        ///< mean over steps of (max cost / mean cost over the ranks)
  double worst_step_imbalance = 1;  ///< the largest per-step value of the same ratio
  std::int64_t steps = 0;           ///< steps per rank
  std::int64_t batches = 0;         ///< batches run by all ranks (steps * R)
  double mean_batch_size = 0;       ///< samples per batch, averaged over those batches
};

/// Builds every rank's sampler for `options` (which must carry lengths) at epoch `epoch` and
/// measures its plan. Works for every mode: fixed-size modes show what padding costs them. Steps
/// whose ranks all get empty batches count as balanced. Pure (no MPI, no I/O); O(R * (plan cost +
/// samples in the epoch)). Throws UsageError without lengths or for lengths of another size than N.
PlanStats plan_stats(const SamplerOptions& options, int world_size, std::int64_t epoch);

}  // namespace strider
