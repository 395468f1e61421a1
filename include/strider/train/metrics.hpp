#pragma once
/// \file
/// Classifier metrics: confusion counts per (label, prediction) for exact evaluation, summed across
/// ranks, and per-class recall from per-class counts (also the training epochs').

#include <cstdint>
#include <vector>

#include "strider/comm/communicator.hpp"

namespace strider {

/// Per class: correct[k] / samples[k]; NaN for a class without samples (JSON writes it as null).
/// Throws UsageError unless the two have the same length. Not collective.
std::vector<double> per_class_recall(const std::vector<std::int64_t>& correct,
                                     const std::vector<std::int64_t>& samples);

/// Confusion counts of a classifier over num_classes classes. Counts are integers, so sums across
/// ranks are exact. Not thread-safe.
class ClassCounts {
 public:
  /// Throws UsageError unless num_classes >= 1.
  explicit ClassCounts(int num_classes);

  /// Counts count (label, prediction) pairs. Throws DataError for a label or prediction outside
  /// 0..num_classes-1. Not collective.
  void add(const std::int32_t* labels, const std::int32_t* predictions, std::int64_t count);
  /// Collective over comm: every rank must call, with the same num_classes. Replaces this rank's
  /// counts by the sum over the ranks (call once per evaluation).
  void all_reduce(const Communicator& comm);
  /// Sets every count to zero.
  void clear();

  int num_classes() const noexcept { return num_classes_; }
  /// Samples counted.
  std::int64_t total() const noexcept;
  /// Samples with this label and this prediction.
  std::int64_t count(int label, int prediction) const;
  /// Samples with this label.
  std::int64_t support(int label) const;
  /// Per class: correct / support; NaN for a class without samples (JSON writes it as null).
  std::vector<double> recall() const;
  /// Correct / total; NaN when nothing was counted.
  double accuracy() const;

 private:
  int num_classes_;
  std::vector<std::int64_t> counts_;  ///< [label * num_classes + prediction]
};

}  // namespace strider
