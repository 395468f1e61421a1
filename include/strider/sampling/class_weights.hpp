#pragma once
/// \file
/// Class weights that change between epochs: the new weights from the current ones and per-class
/// metrics, by the common rule or a user's function, checked. Pure (no MPI): the collective that
/// computes them on rank 0 and broadcasts them is update_class_weights in
/// strider/train/class_weight_update.hpp.

#include <functional>
#include <vector>

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

/// Runs a user's update on (weights, metrics) and checks its result: throws UsageError unless it
/// returns valid weights (finite, >= 0, not all zero) for as many classes as `weights`, or when
/// `update` is empty. Pure: no MPI.
std::vector<double> apply_class_weight_function(const std::vector<double>& weights, const std::vector<double>& metrics,
                                                const ClassWeightFunction& update);

}  // namespace strider
