// BatchInput views of prefetched batches.
#include "strider/train/batch_input.hpp"

#include "strider/pipeline/prefetcher.hpp"

namespace strider {

std::int64_t features_per_sample(const DatasetInfo& dataset) noexcept {
  if (dataset.variable_length) return 0;
  std::int64_t features = 1;
  for (std::int64_t extent : dataset.sample_shape) features *= extent;
  return features;
}

BatchInput batch_input(const Batch& batch, const DatasetInfo& dataset) {
  BatchInput input;
  input.samples = batch.samples();
  input.type = dataset.element_type;
  input.count = batch.size();
  input.features = features_per_sample(dataset);
  input.labels = batch.labels();
  input.offsets = dataset.variable_length ? batch.offsets() : nullptr;
  return input;
}

}  // namespace strider
