#pragma once
/// \file
/// Class weights that change between epochs, agreed across ranks: rank 0 computes the new weights
/// from per-class metrics and broadcasts them, so every rank holds bit-identical weights and hence
/// builds the same weighted plan.

#include <functional>
#include <vector>

#include "strider/comm/communicator.hpp"

namespace strider {

/// The common rule: w_c *= (1 - metric_c), renormalised to the previous sum, floored so that no
/// class vanishes.
struct ClassWeightRule {
  /// After the update a weight is at least this fraction of the previous mean weight (then the
  /// weights are renormalised to the previous sum, which moves the floor by the same factor).
  double min_fraction_of_mean = 0.01;
};

/// A user's update: (current weights, per-class metrics) -> new weights, run on rank 0 only.
using ClassWeightFunction =
    std::function<std::vector<double>(const std::vector<double>& weights, const std::vector<double>& metrics)>;

/// The common rule applied locally (pure, no MPI). Metrics are per class in [0, 1] (for example
/// recall); throws UsageError for metrics of the wrong length or outside [0, 1] (NaN included), or
/// invalid weights (negative, NaN, infinite, all zero).
std::vector<double> apply_class_weight_rule(const std::vector<double>& weights, const std::vector<double>& metrics,
                                            const ClassWeightRule& rule = {});

/// Collective over comm: every rank must call. Rank 0 applies `rule` to its weights and metrics
/// (the metrics should already be reduced over ranks, e.g. with all_reduce) and broadcasts the
/// result into `weights` on every rank. A failure on rank 0 (bad metrics) is raised on every rank
/// as the same AgreedError; no rank is left waiting.
void update_class_weights(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                          const ClassWeightRule& rule = {});

/// Collective over comm: every rank must call. As above with a user function run on rank 0; its
/// result must be valid weights (finite, >= 0, not all zero, one per class) or every rank throws.
void update_class_weights(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                          const ClassWeightFunction& update);

}  // namespace strider
