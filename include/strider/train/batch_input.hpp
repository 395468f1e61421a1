#pragma once
/// \file
/// The backends' view of a prefetched batch: BatchInput (strider/device/batch_input.hpp) from the
/// pipeline's Batch and the dataset's element type and shape. Here, where batches and devices meet,
/// so that neither layer includes the other.

#include <cstdint>

#include "strider/device/batch_input.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

class Batch;

/// The view of a prefetched batch: samples, labels and offsets of `batch`, with the element type and
/// the features per sample (product of sample_shape; 0 for sequences) of `dataset`. Valid while
/// `batch` is held. Not collective.
BatchInput batch_input(const Batch& batch, const DatasetInfo& dataset);

/// Elements per fixed-size sample of `dataset` (product of sample_shape; 0 for sequences).
std::int64_t features_per_sample(const DatasetInfo& dataset) noexcept;

}  // namespace strider
