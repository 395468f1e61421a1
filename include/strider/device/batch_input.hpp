#pragma once
/// \file
/// One batch as the training backends see it: views into host memory (the prefetcher's ring buffer),
/// in the dataset's native element type. The model converts samples to float itself. Core types
/// only: batch_input() (strider/train/batch_input.hpp) makes one from a prefetched Batch.

#include <cstddef>
#include <cstdint>

#include "strider/core/element_type.hpp"

namespace strider {

/// A batch of `count` samples in host memory. Nothing is owned: the memory must stay valid until the
/// backend call that reads it has returned.
///
/// - Fixed-size samples: `samples` holds count * features elements of `type`, row after row;
///   `offsets` is nullptr. Each element is converted to float.
/// - Token sequences: `samples` holds every row's tokens back to back; row i is tokens
///   [offsets[i] - offsets[0], offsets[i+1] - offsets[0]); `features` is 0. Tokens are integer ids.
///   Rows are padded per batch to the longest row only conceptually: padding never reaches the model.
struct BatchInput {
  const std::byte* samples = nullptr;
  ElementType type = ElementType::float32;
  std::int64_t count = 0;
  std::int64_t features = 0;              ///< elements per fixed-size sample; 0 for sequences
  const std::int32_t* labels = nullptr;   ///< count labels in 0..num_classes-1 (required for training)
  const std::int64_t* offsets = nullptr;  ///< sequences: count+1 token offsets, else nullptr
};

}  // namespace strider
