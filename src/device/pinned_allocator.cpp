// make_pinned_allocator() for builds without the CUDA part (the CUDA build defines it in
// src/device/cuda/pinned_allocator.cpp).
#include "strider/device/pinned_allocator.hpp"

#include "strider/config.hpp"
#include "strider/core/error.hpp"

#if !STRIDER_HAS_CUDA
namespace strider {
std::shared_ptr<HostAllocator> make_pinned_allocator() {
  STRIDER_THROW(UsageError, "pinned host memory needs the CUDA backend, and this build has none");
}
}  // namespace strider
#endif
