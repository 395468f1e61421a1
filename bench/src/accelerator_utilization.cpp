#include "strider/bench/accelerator_utilization.hpp"

#include <algorithm>
#include <map>

namespace strider {

std::vector<EpochWindow> epoch_windows(const std::vector<StepTiming>& steps) {
  std::vector<EpochWindow> windows;
  for (std::size_t first = 0; first < steps.size();) {
    std::size_t end = first + 1;
    while (end < steps.size() && steps[end].epoch == steps[first].epoch) ++end;
    // The epoch is steps [first, end); its first step is left out.
    EpochWindow window;
    window.epoch = steps[first].epoch;
    window.start_s = steps[first].compute_end_s;
    window.end_s = steps[end - 1].compute_end_s;
    for (std::size_t step = first + 1; step < end; ++step) {
      window.computing_s += steps[step].compute_end_s - steps[step].compute_start_s;
      window.samples += steps[step].samples;
      window.bytes += steps[step].bytes;
      ++window.steps;
    }
    if (window.steps > 0 && window.end_s > window.start_s) windows.push_back(window);
    first = end;
  }
  return windows;
}

double accelerator_utilization(const std::vector<EpochWindow>& windows) {
  if (windows.empty()) return 0.0;
  double sum = 0.0;
  for (const EpochWindow& window : windows) sum += window.computing_s / (window.end_s - window.start_s);
  return sum / static_cast<double>(windows.size());
}

UtilizationSummary summarize_utilization(const std::vector<std::vector<EpochWindow>>& ranks, double threshold) {
  UtilizationSummary summary;
  summary.au_threshold = threshold;
  if (ranks.empty()) return summary;
  summary.au_min = 1.0;
  // Per epoch: the sum over ranks of each rank's rates over its own window.
  std::map<std::int64_t, std::pair<double, double>> rates;
  for (const std::vector<EpochWindow>& windows : ranks) {
    const double au = accelerator_utilization(windows);
    summary.au += au;
    summary.au_min = std::min(summary.au_min, au);
    for (const EpochWindow& window : windows) {
      const double seconds = window.end_s - window.start_s;
      rates[window.epoch].first += static_cast<double>(window.samples) / seconds;
      rates[window.epoch].second += static_cast<double>(window.bytes) / seconds;
    }
  }
  summary.au /= static_cast<double>(ranks.size());
  summary.passed = summary.au >= threshold;
  for (const auto& [epoch, rate] : rates) {
    summary.samples_per_s += rate.first;
    summary.bytes_per_s += rate.second;
  }
  if (!rates.empty()) {
    summary.samples_per_s /= static_cast<double>(rates.size());
    summary.bytes_per_s /= static_cast<double>(rates.size());
  }
  return summary;
}

}  // namespace strider
