// Confusion counts for exact evaluation and per-class recall.
#include "strider/train/metrics.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "strider/core/error.hpp"

namespace strider {

std::vector<double> per_class_recall(const std::vector<std::int64_t>& correct,
                                     const std::vector<std::int64_t>& samples) {
  STRIDER_REQUIRE(correct.size() == samples.size(), "per_class_recall: " + std::to_string(correct.size()) +
                                                        " correct counts for " + std::to_string(samples.size()) +
                                                        " classes");
  std::vector<double> recalls(samples.size());
  for (std::size_t label = 0; label < samples.size(); ++label) {
    recalls[label] = samples[label] == 0 ? std::numeric_limits<double>::quiet_NaN()
                                         : static_cast<double>(correct[label]) / static_cast<double>(samples[label]);
  }
  return recalls;
}

ClassCounts::ClassCounts(int num_classes) : num_classes_(num_classes) {
  STRIDER_REQUIRE(num_classes >= 1, "ClassCounts needs at least one class, got " + std::to_string(num_classes));
  counts_.assign(static_cast<std::size_t>(num_classes) * static_cast<std::size_t>(num_classes), 0);
}

void ClassCounts::add(const std::int32_t* labels, const std::int32_t* predictions, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    for (const std::int32_t value : {labels[i], predictions[i]}) {
      if (value < 0 || value >= num_classes_) {
        STRIDER_THROW(DataError, std::string(value == labels[i] ? "label " : "prediction ") + std::to_string(value) +
                                     " at row " + std::to_string(i) + " is outside 0.." +
                                     std::to_string(num_classes_ - 1));
      }
    }
  }
  for (std::int64_t i = 0; i < count; ++i) {
    ++counts_[static_cast<std::size_t>(labels[i]) * static_cast<std::size_t>(num_classes_) +
              static_cast<std::size_t>(predictions[i])];
  }
}

void ClassCounts::all_reduce(const Communicator& comm) {
  comm.all_reduce(counts_.data(), static_cast<std::int64_t>(counts_.size()), ReduceOp::sum);
}

void ClassCounts::clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
}

std::int64_t ClassCounts::total() const noexcept {
  return std::accumulate(counts_.begin(), counts_.end(), std::int64_t{0});
}

std::int64_t ClassCounts::count(int label, int prediction) const {
  STRIDER_REQUIRE(label >= 0 && label < num_classes_ && prediction >= 0 && prediction < num_classes_,
                  "ClassCounts::count: class outside 0.." + std::to_string(num_classes_ - 1));
  return counts_[static_cast<std::size_t>(label) * static_cast<std::size_t>(num_classes_) +
                 static_cast<std::size_t>(prediction)];
}

std::int64_t ClassCounts::support(int label) const {
  STRIDER_REQUIRE(label >= 0 && label < num_classes_,
                  "ClassCounts::support: class outside 0.." + std::to_string(num_classes_ - 1));
  const auto row = counts_.begin() + static_cast<std::ptrdiff_t>(label) * num_classes_;
  return std::accumulate(row, row + num_classes_, std::int64_t{0});
}

std::vector<double> ClassCounts::recall() const {
  std::vector<std::int64_t> correct(static_cast<std::size_t>(num_classes_));
  std::vector<std::int64_t> samples(static_cast<std::size_t>(num_classes_));
  for (int label = 0; label < num_classes_; ++label) {
    correct[static_cast<std::size_t>(label)] = count(label, label);
    samples[static_cast<std::size_t>(label)] = support(label);
  }
  return per_class_recall(correct, samples);
}

double ClassCounts::accuracy() const {
  const std::int64_t samples = total();
  if (samples == 0) return std::numeric_limits<double>::quiet_NaN();
  std::int64_t correct = 0;
  for (int label = 0; label < num_classes_; ++label) correct += count(label, label);
  return static_cast<double>(correct) / static_cast<double>(samples);
}

}  // namespace strider
