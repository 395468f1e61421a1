// The CPU twin of device batches: slots in page-aligned host memory, filled at once with the
// element conversion's CPU function. No events: a batch is ready when put() returns.
#include <cstring>
#include <vector>

#include "device/device_batch_engine.hpp"

namespace strider::detail {
namespace {

class CpuDeviceBatchEngine final : public DeviceBatchEngine {
 public:
  std::string name() const override { return "cpu"; }
  int device() const override { return -1; }
  std::shared_ptr<HostAllocator> host_allocator() const override { return make_page_aligned_allocator(); }
  void create_slots(int count) override { slots_.resize(static_cast<std::size_t>(count)); }
  void prepare(const ElementConversion&) override {}  // the statistics stay where they are

  std::byte* copy(int index, const BatchInput& host, const SlotLayout& layout,
                  const ElementConversion* conversion) override {
    HostBuffer& slot = slots_[static_cast<std::size_t>(index)];
    if (layout.total > slot.size()) slot = HostBuffer(allocator_, layout.total + layout.total / 4);
    std::byte* base = slot.data();
    if (conversion != nullptr) {
      conversion->convert(host.samples, host.count, base);
    } else if (layout.input_bytes > 0) {
      std::memcpy(base, host.samples, layout.input_bytes);
    }
    if (layout.label_bytes > 0) std::memcpy(base + layout.labels_at, host.labels, layout.label_bytes);
    if (layout.offset_bytes > 0) std::memcpy(base + layout.offsets_at, host.offsets, layout.offset_bytes);
    return base;
  }

  DeviceEvent ready(int) const override { return nullptr; }
  void release(int, DeviceEvent) override {}  // nothing runs asynchronously on the host's slots
  bool copy_finished(int) override { return true; }
  void wait_for_copy(int) override {}
  void synchronize() override {}
  void finish() noexcept override {}

 private:
  std::shared_ptr<HostAllocator> allocator_ = make_page_aligned_allocator();
  std::vector<HostBuffer> slots_;
};

}  // namespace

std::unique_ptr<DeviceBatchEngine> make_cpu_device_batch_engine() {
  return std::make_unique<CpuDeviceBatchEngine>();
}

}  // namespace strider::detail
