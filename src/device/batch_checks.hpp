#pragma once
// Checks of a batch against a model, shared by the CPU models and the CUDA backend (which runs them
// on the host before anything is copied), so both refuse the same batches with the same words.

#include <cstdint>

#include "strider/device/batch_input.hpp"

namespace strider::detail {

/// Throws UsageError unless the batch holds `features` features per sample (no offsets), a
/// non-negative count, and data when it is not empty.
void check_feature_batch(const BatchInput& input, std::int64_t features);

/// Throws UsageError unless the batch holds token sequences with integer ids and data when not
/// empty; DataError when the offsets decrease (naming the row).
void check_token_batch(const BatchInput& input);

}  // namespace strider::detail
