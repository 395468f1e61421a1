#include "strider/pipeline/host_allocator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "pipeline/pages.hpp"
#include "strider/core/error.hpp"

namespace strider {

namespace {

class PageAlignedAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    using pipeline_detail::kPageBytes;
    const std::size_t rounded = pipeline_detail::round_up(std::max<std::size_t>(bytes, 1), kPageBytes);
    void* pointer = std::aligned_alloc(kPageBytes, rounded);
    if (pointer == nullptr)
      STRIDER_THROW(SystemError,
                    "cannot allocate " + std::to_string(bytes) + " bytes of host memory for batch buffers");
    // Touch every page now, on the allocating thread, so that the I/O thread does not take the page
    // faults while the consumer waits for its first batches.
    std::memset(pointer, 0, rounded);
    return pointer;
  }
  void deallocate(void* pointer, std::size_t) noexcept override { std::free(pointer); }
  std::string name() const override { return "page-aligned"; }
};

}  // namespace

std::shared_ptr<HostAllocator> make_page_aligned_allocator() {
  return std::make_shared<PageAlignedAllocator>();
}

HostBuffer::HostBuffer(std::shared_ptr<HostAllocator> allocator, std::size_t bytes)
    : allocator_(std::move(allocator)), bytes_(bytes) {
  data_ = static_cast<std::byte*>(allocator_->allocate(bytes));
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : allocator_(std::move(other.allocator_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    free();
    allocator_ = std::move(other.allocator_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

HostBuffer::~HostBuffer() {
  free();
}

void HostBuffer::free() noexcept {
  if (data_ != nullptr && allocator_) allocator_->deallocate(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace strider
