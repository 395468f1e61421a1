#include "strider/sampling/plan_stats.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "strider/core/error.hpp"

namespace strider {

PlanStats plan_stats(const SamplerOptions& options, int world_size, std::int64_t epoch) {
  if (!options.lengths) STRIDER_THROW(UsageError, "plan statistics need per-sample lengths");
  const SharedView<std::int64_t>& lengths = options.lengths;
  if (static_cast<std::int64_t>(lengths.size()) != options.dataset_size)
    STRIDER_THROW(UsageError, "plan statistics: " + std::to_string(lengths.size()) + " lengths for a dataset of " +
                                  std::to_string(options.dataset_size) + " samples");
  std::vector<std::unique_ptr<Sampler>> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.push_back(make_sampler(options, world_size, rank));
    ranks.back()->set_epoch(epoch);
  }
  PlanStats stats;
  stats.steps = ranks.empty() ? 0 : ranks[0]->num_steps();
  double real_tokens = 0, padded_tokens = 0, imbalance_sum = 0, samples = 0;
  std::vector<std::int64_t> indices;
  for (std::int64_t step = 0; step < stats.steps; ++step) {
    double cost_sum = 0, cost_max = 0;
    for (const auto& sampler : ranks) {
      sampler->batch(step, indices);
      std::int64_t longest = 0;
      for (std::int64_t index : indices) {
        const std::int64_t length = lengths[static_cast<std::size_t>(index)];
        longest = std::max(longest, length);
        real_tokens += static_cast<double>(length);
      }
      const double cost = static_cast<double>(longest) * static_cast<double>(indices.size());
      padded_tokens += cost;
      cost_sum += cost;
      cost_max = std::max(cost_max, cost);
      samples += static_cast<double>(indices.size());
    }
    const double imbalance = cost_sum > 0 ? cost_max / (cost_sum / world_size) : 1.0;
    imbalance_sum += imbalance;
    stats.worst_step_imbalance = std::max(stats.worst_step_imbalance, imbalance);
  }
  stats.batches = stats.steps * world_size;
  if (padded_tokens > 0) stats.padding_efficiency = real_tokens / padded_tokens;
  if (stats.steps > 0) stats.step_imbalance = imbalance_sum / static_cast<double>(stats.steps);
  if (stats.batches > 0) stats.mean_batch_size = samples / static_cast<double>(stats.batches);
  return stats;
}

}  // namespace strider
