#include "strider/sampling/class_index.hpp"

#include <algorithm>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"

namespace strider {

ClassIndex::ClassIndex(SharedView<std::int32_t> labels, int num_classes) : labels_(std::move(labels)) {
  if (!labels_) STRIDER_THROW(UsageError, "class-aware sampling needs labels (none were given)");
  if (num_classes < 0) STRIDER_THROW(UsageError, "number of classes must be >= 0, got " + std::to_string(num_classes));
  std::int32_t max_label = -1;
  for (std::size_t i = 0; i < labels_.size(); ++i) {
    const std::int32_t label = labels_[i];
    if (label < 0 || (num_classes > 0 && label >= num_classes))
      STRIDER_THROW(UsageError, "label " + std::to_string(label) + " of sample " + std::to_string(i) +
                                    " is outside [0, " + (num_classes > 0 ? std::to_string(num_classes) : "K") + ")");
    if (label >= kMaxClasses)
      STRIDER_THROW(UsageError, "label " + std::to_string(label) + " of sample " + std::to_string(i) +
                                    " is above the most classes class-aware sampling takes (" +
                                    std::to_string(kMaxClasses) + "): labels must be class numbers 0..K-1");
    max_label = std::max(max_label, label);
  }
  const int classes = num_classes > 0 ? num_classes : max_label + 1;
  // Counting sort: counts, prefix sums, then one stable pass.
  offsets_.assign(static_cast<std::size_t>(classes) + 1, 0);
  for (std::int32_t label : labels_) ++offsets_[static_cast<std::size_t>(label) + 1];
  for (std::size_t c = 1; c < offsets_.size(); ++c) offsets_[c] += offsets_[c - 1];
  sorted_.resize(labels_.size());
  std::vector<std::int64_t> cursor(offsets_.begin(), offsets_.end() - 1);
  for (std::size_t i = 0; i < labels_.size(); ++i)
    sorted_[static_cast<std::size_t>(cursor[static_cast<std::size_t>(labels_[i])]++)] = static_cast<std::int64_t>(i);

  Fnv1a64 hash;
  hash.add(static_cast<std::int64_t>(classes));
  hash.add(static_cast<std::int64_t>(labels_.size()));
  hash.add_bytes(labels_.data(), labels_.size() * sizeof(std::int32_t));
  labels_hash_ = hash.value();
}

std::vector<std::int32_t> labels_from_class_counts(const std::vector<std::int64_t>& counts) {
  std::vector<std::int32_t> labels;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] < 0)
      STRIDER_THROW(UsageError, "class " + std::to_string(c) + " has a negative count " + std::to_string(counts[c]));
    labels.insert(labels.end(), static_cast<std::size_t>(counts[c]), static_cast<std::int32_t>(c));
  }
  return labels;
}

std::vector<std::int64_t> class_histogram(const ClassIndex& index, const std::vector<std::int64_t>& indices) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(index.num_classes()), 0);
  for (std::int64_t sample : indices) ++counts[static_cast<std::size_t>(index.label(sample))];
  return counts;
}

}  // namespace strider
