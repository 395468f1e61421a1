// The dataset fingerprint of checkpoints.
#include "strider/train/fingerprint.hpp"

#include <algorithm>
#include <cstdio>

#include "strider/core/hash.hpp"

namespace strider {

std::uint64_t dataset_fingerprint(const DatasetInfo& dataset, const SharedView<std::int32_t>& labels,
                                  const SharedView<std::int64_t>& lengths, const DatasetKeys& keys) {
  return dataset_fingerprint(
      dataset, static_cast<std::int64_t>(labels.size()),
      [&](std::int64_t first, std::int64_t count, std::int32_t* out) {
        std::copy(labels.begin() + first, labels.begin() + first + count, out);
      },
      lengths, keys);
}

std::uint64_t dataset_fingerprint(const DatasetInfo& dataset, std::int64_t label_count,
                                  const LabelRangeReader& read_labels, const SharedView<std::int64_t>& lengths,
                                  const DatasetKeys& keys, std::int32_t* max_label) {
  Fnv1a64 hash;
  hash.add("strider dataset fingerprint 1");
  hash.add(static_cast<std::uint8_t>(dataset.variable_length));
  if (dataset.variable_length) {
    hash.add(keys.tokens);
    hash.add(keys.offsets);
  } else {
    hash.add(keys.data);
  }
  hash.add(static_cast<std::uint8_t>(dataset.has_labels));
  if (dataset.has_labels) hash.add(keys.labels);
  hash.add(dataset.num_samples);
  hash.add(static_cast<std::uint64_t>(dataset.sample_shape.size()));
  for (std::int64_t extent : dataset.sample_shape) hash.add(extent);
  hash.add(element_name(dataset.element_type));
  hash.add(dataset.num_tokens);
  // The labels' bytes, a chunk at a time (FNV-1a is byte-sequential: chunking does not change it).
  hash.add(static_cast<std::uint64_t>(label_count));
  constexpr std::int64_t chunk = 1 << 20;
  std::vector<std::int32_t> buffer(static_cast<std::size_t>(std::min(chunk, label_count)));
  std::int32_t largest = 0;
  for (std::int64_t first = 0; first < label_count; first += chunk) {
    const std::int64_t count = std::min(chunk, label_count - first);
    read_labels(first, count, buffer.data());
    hash.add_bytes(buffer.data(), static_cast<std::size_t>(count) * sizeof(std::int32_t));
    for (std::int64_t k = 0; k < count; ++k) largest = std::max(largest, buffer[k]);
  }
  if (max_label != nullptr) *max_label = largest;
  hash.add(static_cast<std::uint64_t>(lengths.size()));
  hash.add_bytes(lengths.data(), lengths.size() * sizeof(std::int64_t));
  // Shards: their order (by file name, not directory) and row counts. A single file adds nothing,
  // so its fingerprint is what it always was.
  if (dataset.shards.size() > 1) {
    hash.add(static_cast<std::uint64_t>(dataset.shards.size()));
    for (const DatasetShard& shard : dataset.shards) {
      hash.add(shard.path.substr(shard.path.find_last_of('/') + 1));
      hash.add(shard.rows);
    }
  }
  return hash.value();
}

std::string fingerprint_hex(std::uint64_t fingerprint) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

}  // namespace strider
