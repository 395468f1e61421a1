#pragma once
// Where device batches go (private): the CPU twin's host memory, or a CUDA device's memory through
// a copy stream. DeviceBatches (src/device/device_batches.cpp) keeps the slots' bookkeeping, checks
// and layouts once; an engine only moves and converts bytes.

#include <cstddef>
#include <memory>
#include <string>

#include "strider/config.hpp"
#include "strider/device/device_batches.hpp"

namespace strider::detail {

/// Where the parts of one batch lie in a slot, in bytes from the slot's start (each part aligned to
/// slot_alignment), and how many bytes the samples take on the host (as stored).
struct SlotLayout {
  static constexpr std::size_t slot_alignment = 256;
  std::size_t input_bytes = 0;   ///< the samples as stored, copied from the host
  std::size_t sample_bytes = 0;  ///< the samples in the slot (after any conversion)
  std::size_t label_bytes = 0;
  std::size_t offset_bytes = 0;
  std::size_t labels_at = 0;
  std::size_t offsets_at = 0;
  std::size_t total = 0;  ///< the slot size the batch needs
};

/// Moves and converts batches into slots. Calls come from one thread.
class DeviceBatchEngine {
 public:
  virtual ~DeviceBatchEngine() = default;
  /// "cuda" or "cpu".
  virtual std::string name() const = 0;
  /// The CUDA device ordinal, or -1.
  virtual int device() const = 0;
  virtual std::shared_ptr<HostAllocator> host_allocator() const = 0;
  /// Makes `count` empty slots; called once, first.
  virtual void create_slots(int count) = 0;
  /// Puts the conversion's statistics where copy() reads them (once per conversion).
  virtual void prepare(const ElementConversion& conversion) = 0;
  /// Starts copying `host` into `slot` as `layout` says (growing the slot when it is too small),
  /// converting the samples with `conversion` (null: the bytes as stored), after the release event
  /// of the slot's previous batch. Returns the slot's start.
  virtual std::byte* copy(int slot, const BatchInput& host, const SlotLayout& layout,
                          const ElementConversion* conversion) = 0;
  /// The event that completes when the last copy into `slot` has finished (null on the CPU).
  virtual DeviceEvent ready(int slot) const = 0;
  /// The next copy into `slot` waits for `done` (null: for nothing).
  virtual void release(int slot, DeviceEvent done) = 0;
  /// Whether the last copy into `slot` has finished; never blocks.
  virtual bool copy_finished(int slot) = 0;
  /// Blocks until the last copy into `slot` has finished.
  virtual void wait_for_copy(int slot) = 0;
  /// Blocks until every copy has finished.
  virtual void synchronize() = 0;
  /// Blocks until every copy and every release event has completed, so that the memory can be
  /// freed. Never throws (logs).
  virtual void finish() noexcept = 0;
};

/// The CPU twin: page-aligned host slots, the conversion done at once by ElementConversion.
std::unique_ptr<DeviceBatchEngine> make_cpu_device_batch_engine();

#if STRIDER_HAS_CUDA
/// The engine on CUDA device `device`. Throws UsageError when float16_output and the device cannot
/// convert to half precision, CudaError when a stream or event cannot be made.
std::unique_ptr<DeviceBatchEngine> make_cuda_device_batch_engine(int device, bool float16_output);
#endif

}  // namespace strider::detail
