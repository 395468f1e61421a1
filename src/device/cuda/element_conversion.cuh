#pragma once
// The element conversion on the GPU (private): the kernel twin of ElementConversion::convert
// (include/strider/device/element_conversion.hpp), used by device batches and the CUDA backend.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "strider/device/element_conversion.hpp"

namespace strider::detail {

/// Enqueues on `stream` the conversion of `rows` samples of conversion.features() elements of
/// conversion.input_type() at device address `in` to conversion.output_type() at `out` (float32
/// or float16; `in` and `out` aligned to their element sizes, not overlapping). `means` and
/// `stddevs` hold conversion.feature_means() / feature_stddevs() in device memory (null when the
/// conversion does not normalize). Checks the launch; does not synchronize. Throws UsageError when
/// conversion.converts() is false (nothing to launch: copy the bytes instead).
void launch_element_conversion(cudaStream_t stream, const ElementConversion& conversion, const std::byte* in,
                               std::int64_t rows, const float* means, const float* stddevs, std::byte* out);

}  // namespace strider::detail
