// The dataset fingerprint of checkpoints.
#include "strider/train/fingerprint.hpp"

#include <cstdio>

#include "strider/core/hash.hpp"

namespace strider {

std::uint64_t dataset_fingerprint(const DatasetInfo& dataset, const std::vector<std::int32_t>& labels,
                                  const std::vector<std::int64_t>& lengths, const DatasetKeys& keys) {
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
  hash.add(static_cast<std::uint64_t>(labels.size()));
  hash.add_bytes(labels.data(), labels.size() * sizeof(std::int32_t));
  hash.add(static_cast<std::uint64_t>(lengths.size()));
  hash.add_bytes(lengths.data(), lengths.size() * sizeof(std::int64_t));
  return hash.value();
}

std::string fingerprint_hex(std::uint64_t fingerprint) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

}  // namespace strider
