#pragma once
/// \file
/// Host memory for the prefetcher's ring: page-aligned memory on the CPU backend, pinned
/// (cudaHostAlloc) memory when the CUDA backend runs (its host_allocator(), in device/), through one
/// interface so that the pipeline needs no CUDA.

#include <cstddef>
#include <memory>
#include <string>

namespace strider {

/// Allocates the ring's batch buffers. Implementations are thread-safe.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  /// At least `bytes` bytes, aligned to at least 4096 bytes; throws Error on failure.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Frees memory from allocate(); never throws.
  virtual void deallocate(void* pointer, std::size_t bytes) noexcept = 0;
  /// "page-aligned", "cuda-pinned", ...
  virtual std::string name() const = 0;
};

/// Page-aligned host memory (std::aligned_alloc). The CPU backend's allocator.
std::shared_ptr<HostAllocator> make_page_aligned_allocator();

/// A buffer from a HostAllocator, freed on destruction. Move-only.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::shared_ptr<HostAllocator> allocator, std::size_t bytes);
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return bytes_; }

 private:
  void free() noexcept;
  std::shared_ptr<HostAllocator> allocator_;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace strider
