#include "strider/pipeline/accelerator_utilization.hpp"

#include <algorithm>
#include <numeric>

namespace strider {

double accelerator_utilization(const std::vector<StepTiming>& steps) {
  double sum = 0.0;
  int epochs = 0;
  for (std::size_t first = 0; first < steps.size();) {
    std::size_t end = first + 1;
    while (end < steps.size() && steps[end].epoch == steps[first].epoch) ++end;
    // The epoch is steps [first, end); its first step is left out.
    double computing = 0.0;
    for (std::size_t step = first + 1; step < end; ++step)
      computing += steps[step].compute_end_s - steps[step].compute_start_s;
    const double total = steps[end - 1].compute_end_s - steps[first].compute_end_s;
    if (end - first >= 2 && total > 0) {
      sum += computing / total;
      ++epochs;
    }
    first = end;
  }
  return epochs > 0 ? sum / epochs : 0.0;
}

UtilizationSummary summarize_utilization(const std::vector<double>& per_rank_au, double threshold) {
  UtilizationSummary summary;
  summary.au_threshold = threshold;
  if (per_rank_au.empty()) return summary;
  summary.au = std::accumulate(per_rank_au.begin(), per_rank_au.end(), 0.0) / static_cast<double>(per_rank_au.size());
  summary.au_min = *std::min_element(per_rank_au.begin(), per_rank_au.end());
  summary.passed = summary.au >= threshold;
  return summary;
}

}  // namespace strider
