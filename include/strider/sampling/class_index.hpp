#pragma once
/// \file
/// Per-class sample lists built once from integer labels, for the class-aware sampling modes
/// (balanced, weighted, stratified).

#include <cstdint>
#include <memory>
#include <vector>

#include "strider/core/shared_view.hpp"

namespace strider {

/// The most classes (labels 0..kMaxClasses-1) a class-aware sampler or the trainer takes: labels are
/// class numbers, and one far above the others (an id, a hash) would size per-class arrays by it.
inline constexpr std::int32_t kMaxClasses = 1 << 24;

/// The samples of each class, built in O(N + K) by a counting sort over the labels (no per-sample
/// search). Labels are integers 0..K-1, one per sample. Immutable after construction: share one
/// index between samplers (several ranks, several epochs) through a shared_ptr. Thread-safe to read.
class ClassIndex {
 public:
  /// Builds the index. `num_classes` 0 takes max label + 1. Throws UsageError for null labels, a
  /// negative label or a label >= num_classes.
  explicit ClassIndex(SharedView<std::int32_t> labels, int num_classes = 0);

  /// The index built elsewhere (memory a node's ranks share: the Loader's) by sort_into: K+1
  /// offsets and N sorted indices, for `labels`, which classes_of() has checked.
  ClassIndex(SharedView<std::int32_t> labels, SharedView<std::int64_t> offsets, SharedView<std::int64_t> sorted);
  /// K for these labels: `num_classes`, or max label + 1 where 0. Throws as the constructor does.
  static int classes_of(const SharedView<std::int32_t>& labels, int num_classes = 0);
  /// Writes the index of `labels` (checked, K classes): offsets[K+1], then sorted[N].
  static void sort_into(const SharedView<std::int32_t>& labels, int classes, std::int64_t* offsets,
                        std::int64_t* sorted) noexcept;

  /// N, the number of samples.
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(labels_.size()); }
  /// K, the number of classes (some may have no sample).
  int num_classes() const noexcept { return static_cast<int>(offsets_.size()) - 1; }
  /// Samples of class `label` (0 <= label < K).
  std::int64_t count(int label) const {
    return offsets_[static_cast<std::size_t>(label) + 1] - offsets_[static_cast<std::size_t>(label)];
  }
  /// Class `label`'s sample indices in increasing order: [members(label), members(label) + count(label)).
  const std::int64_t* members(int label) const { return sorted_.data() + offsets_[static_cast<std::size_t>(label)]; }
  /// The label of sample `index` (0 <= index < N).
  std::int32_t label(std::int64_t index) const { return labels_[static_cast<std::size_t>(index)]; }
  const SharedView<std::int32_t>& labels() const noexcept { return labels_; }
  /// FNV-1a hash of K and every label, computed once at construction (for config hashes).
  std::uint64_t labels_hash() const noexcept { return labels_hash_; }

 private:
  SharedView<std::int32_t> labels_;
  SharedView<std::int64_t> offsets_;  // K+1 class boundaries in sorted_
  SharedView<std::int64_t> sorted_;   // sample indices grouped by class, increasing within a class
  std::uint64_t labels_hash_ = 0;
};

/// Labels in blocks: the first counts[0] indices are class 0, the next counts[1] class 1, and so on
/// (what `--class-counts` and strider-gen produce). Throws UsageError for a negative count.
std::vector<std::int32_t> labels_from_class_counts(const std::vector<std::int64_t>& counts);

/// Per-class sample counts of `indices` under `index`'s labels (K entries).
std::vector<std::int64_t> class_histogram(const ClassIndex& index, const std::vector<std::int64_t>& indices);

}  // namespace strider
