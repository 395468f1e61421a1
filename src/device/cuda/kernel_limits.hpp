#pragma once
// A test seam of the CUDA kernels that needs no CUDA header, so that the GPU tests can call it.

#include <cstdint>

namespace strider::detail::kernels {

/// Launches at most `blocks` blocks per kernel (0: the default, 2^20), so that a test with small
/// batches runs every grid-stride loop more than once. Tests only; not thread-safe.
void limit_blocks_for_testing(std::int64_t blocks);

}  // namespace strider::detail::kernels
