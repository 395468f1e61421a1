#include "strider/pipeline/accelerator_utilization.hpp"

#include <algorithm>

namespace strider {

RankUtilization accelerator_utilization(const std::vector<StepTiming>& steps) {
  RankUtilization sums;
  int epochs = 0;
  for (std::size_t first = 0; first < steps.size();) {
    std::size_t end = first + 1;
    while (end < steps.size() && steps[end].epoch == steps[first].epoch) ++end;
    // The epoch is steps [first, end); its first step is left out.
    const double window = steps[end - 1].compute_end_s - steps[first].compute_end_s;
    if (end - first >= 2 && window > 0) {
      double computing = 0.0, samples = 0.0, bytes = 0.0;
      for (std::size_t step = first + 1; step < end; ++step) {
        computing += steps[step].compute_end_s - steps[step].compute_start_s;
        samples += static_cast<double>(steps[step].samples);
        bytes += static_cast<double>(steps[step].bytes);
      }
      sums.au += computing / window;
      sums.samples_per_s += samples / window;
      sums.bytes_per_s += bytes / window;
      sums.counted_steps += static_cast<std::int64_t>(end - first - 1);
      ++epochs;
    }
    first = end;
  }
  if (epochs > 0) {
    sums.au /= epochs;
    sums.samples_per_s /= epochs;
    sums.bytes_per_s /= epochs;
  }
  return sums;
}

UtilizationSummary summarize_utilization(const std::vector<RankUtilization>& ranks, double threshold) {
  UtilizationSummary summary;
  summary.au_threshold = threshold;
  if (ranks.empty()) return summary;
  summary.au_min = ranks.front().au;
  for (const RankUtilization& rank : ranks) {
    summary.au += rank.au;
    summary.au_min = std::min(summary.au_min, rank.au);
    summary.samples_per_s += rank.samples_per_s;
    summary.bytes_per_s += rank.bytes_per_s;
  }
  summary.au /= static_cast<double>(ranks.size());
  summary.passed = summary.au >= threshold;
  return summary;
}

}  // namespace strider
