#include "strider/sampling/class_weights.hpp"

#include <algorithm>
#include <cmath>

#include "strider/core/error.hpp"
#include "strider/sampling/weighted_sampler.hpp"

namespace strider {

namespace {

double sum_of(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum;
}

}  // namespace

std::vector<double> apply_class_weight_rule(const std::vector<double>& weights, const std::vector<double>& metrics,
                                            const ClassWeightRule& rule) {
  check_weights(weights, "class weights");
  if (metrics.size() != weights.size())
    STRIDER_THROW(UsageError, "there are " + std::to_string(metrics.size()) + " per-class metrics for " +
                                  std::to_string(weights.size()) + " classes");
  if (!(rule.min_fraction_of_mean > 0) || !std::isfinite(rule.min_fraction_of_mean))
    STRIDER_THROW(UsageError, "the weight floor must be a positive fraction of the mean weight");
  const double previous_sum = sum_of(weights);
  const double floor = rule.min_fraction_of_mean * previous_sum / static_cast<double>(weights.size());
  std::vector<double> updated(weights.size());
  for (std::size_t c = 0; c < weights.size(); ++c) {
    if (!(metrics[c] >= 0 && metrics[c] <= 1))
      STRIDER_THROW(UsageError, "per-class metrics must be in [0, 1]: class " + std::to_string(c) + " has " +
                                    std::to_string(metrics[c]));
    updated[c] = std::max(weights[c] * (1 - metrics[c]), floor);
  }
  const double scale = previous_sum / sum_of(updated);
  for (double& weight : updated) weight *= scale;
  return updated;
}

std::vector<double> apply_class_weight_function(const std::vector<double>& weights, const std::vector<double>& metrics,
                                                const ClassWeightFunction& update) {
  if (!update) STRIDER_THROW(UsageError, "update_class_weights needs a function");
  std::vector<double> updated = update(weights, metrics);
  check_weights(updated, "the updated class weights");
  if (updated.size() != weights.size())
    STRIDER_THROW(UsageError, "the weight update returned " + std::to_string(updated.size()) + " weights for " +
                                  std::to_string(weights.size()) + " classes");
  return updated;
}

}  // namespace strider
