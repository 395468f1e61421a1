// The pinned host allocator of the CUDA build (cudaHostAlloc through the checked wrappers).
#include "strider/device/pinned_allocator.hpp"

#include "device/cuda/cuda_check.hpp"
#include "device/cuda/cuda_handles.hpp"

namespace strider {
namespace {

class PinnedAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override { return detail::allocate_pinned(bytes).release(); }
  void deallocate(void* pointer, std::size_t) noexcept override { detail::PinnedMemoryTraits::release(pointer); }
  std::string name() const override { return "cuda-pinned"; }
};

}  // namespace

std::shared_ptr<HostAllocator> make_pinned_allocator() {
  return std::make_shared<PinnedAllocator>();
}

}  // namespace strider
