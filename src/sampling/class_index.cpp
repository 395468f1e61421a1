#include "strider/sampling/class_index.hpp"

#include <algorithm>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"

namespace strider {

int ClassIndex::classes_of(const SharedView<std::int32_t>& labels, int num_classes) {
  if (!labels) STRIDER_THROW(UsageError, "class-aware sampling needs labels (none were given)");
  if (num_classes < 0) STRIDER_THROW(UsageError, "number of classes must be >= 0, got " + std::to_string(num_classes));
  std::int32_t max_label = -1;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::int32_t label = labels[i];
    if (label < 0 || (num_classes > 0 && label >= num_classes))
      STRIDER_THROW(UsageError, "label " + std::to_string(label) + " of sample " + std::to_string(i) +
                                    " is outside [0, " + (num_classes > 0 ? std::to_string(num_classes) : "K") + ")");
    if (label >= kMaxClasses)
      STRIDER_THROW(UsageError, "label " + std::to_string(label) + " of sample " + std::to_string(i) +
                                    " is above the most classes class-aware sampling takes (" +
                                    std::to_string(kMaxClasses) + "): labels must be class numbers 0..K-1");
    max_label = std::max(max_label, label);
  }
  return num_classes > 0 ? num_classes : max_label + 1;
}

void ClassIndex::sort_into(const SharedView<std::int32_t>& labels, int classes, std::int64_t* offsets,
                           std::int64_t* sorted) noexcept {
  // Counting sort: counts, prefix sums, then one stable pass (the offsets as cursors, restored after).
  std::fill(offsets, offsets + classes + 1, std::int64_t{0});
  for (std::int32_t label : labels) ++offsets[label + 1];
  for (int c = 1; c <= classes; ++c) offsets[c] += offsets[c - 1];
  for (std::size_t i = 0; i < labels.size(); ++i) sorted[offsets[labels[i]]++] = static_cast<std::int64_t>(i);
  for (int c = classes; c > 0; --c) offsets[c] = offsets[c - 1];
  offsets[0] = 0;
}

ClassIndex::ClassIndex(SharedView<std::int32_t> labels, int num_classes) : labels_(std::move(labels)) {
  const int classes = classes_of(labels_, num_classes);
  auto offsets = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(classes) + 1);
  auto sorted = std::make_shared<std::vector<std::int64_t>>(labels_.size());
  sort_into(labels_, classes, offsets->data(), sorted->data());
  offsets_ = std::move(offsets);
  sorted_ = std::move(sorted);
  Fnv1a64 hash;
  hash.add(static_cast<std::int64_t>(classes));
  hash.add(static_cast<std::int64_t>(labels_.size()));
  hash.add_bytes(labels_.data(), labels_.size() * sizeof(std::int32_t));
  labels_hash_ = hash.value();
}

ClassIndex::ClassIndex(SharedView<std::int32_t> labels, SharedView<std::int64_t> offsets,
                       SharedView<std::int64_t> sorted)
    : labels_(std::move(labels)), offsets_(std::move(offsets)), sorted_(std::move(sorted)) {
  if (!labels_ || offsets_.size() < 1 || sorted_.size() != labels_.size())
    STRIDER_THROW(UsageError, "a class index needs K+1 offsets and one sorted entry per label");
  Fnv1a64 hash;
  hash.add(static_cast<std::int64_t>(offsets_.size()) - 1);
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
