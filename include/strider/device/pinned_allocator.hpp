#pragma once
/// \file
/// Pinned host memory for the prefetcher's ring, so that batches copy to a GPU asynchronously. The
/// CUDA backend's host_allocator() returns it; a trainer rarely needs it directly.

#include <memory>

#include "strider/pipeline/host_allocator.hpp"

namespace strider {

/// Pinned host memory (cudaHostAlloc) for fast asynchronous copies to the GPU. Throws UsageError in a
/// build without CUDA. Not collective; the allocator is thread-safe.
std::shared_ptr<HostAllocator> make_pinned_allocator();

}  // namespace strider
