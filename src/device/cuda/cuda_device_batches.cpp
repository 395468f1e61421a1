// Device batches on a CUDA device: one copy stream for every batch, a small stream that turns the
// trainer's release events into each slot's own event, and one device buffer per slot.
//
// Per put() into slot s, on the copy stream:
//   converting:  H2D samples -> staging  [wait s.released]  kernel staging -> s  H2D labels, offsets  s.ready
//   as stored:   [wait s.released]  H2D samples, labels, offsets -> s  s.ready
// and per release(batch, done): release stream [wait done] record s.released. So a slot is
// overwritten only after the work that reads it, with no host wait; one staging buffer serves
// every slot because the copy stream runs in order.
#include <cstring>
#include <string>
#include <vector>

#include "device/cuda/cuda_check.hpp"
#include "device/cuda/cuda_handles.hpp"
#include "device/cuda/element_conversion.cuh"
#include "device/device_batch_engine.hpp"
#include "strider/core/log.hpp"
#include "strider/device/pinned_allocator.hpp"

namespace strider::detail {
namespace {

/// Whether the calling thread has a current CUDA context: cuCtxGetCurrent, reached through the
/// runtime so that libstrider does not link libcuda. True when it cannot be asked (then the caller's
/// device is restored as it would be without the check).
bool thread_has_context() {
  using GetCurrent = int (*)(void**);  // CUresult cuCtxGetCurrent(CUcontext*)
  static const GetCurrent get_current = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t code =
        cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &function, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t code = cudaGetDriverEntryPoint("cuCtxGetCurrent", &function, cudaEnableDefault, &found);
#endif
    return code == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<GetCurrent>(function)
                                                                       : nullptr;
  }();
  if (get_current == nullptr) return true;
  void* context = nullptr;
  return get_current(&context) != 0 || context != nullptr;
}

/// Makes `device` current for the scope, and after it makes the caller's device current again if the
/// caller had one in use. A thread with no context yet (cudaGetDevice answers 0 there) is left on
/// `device`: restoring "device 0" would create a context on GPU 0 for a rank bound to another GPU
/// (about 0.5 GB, and an error under exclusive-process mode).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) : device_(device) {
    STRIDER_CUDA_CHECK(cudaGetDevice(&previous_), "asking which CUDA device is current");
    restore_ = previous_ != device_ && thread_has_context();
    if (previous_ != device_)
      STRIDER_CUDA_CHECK(cudaSetDevice(device_), "making device " + std::to_string(device_) + " current");
  }
  ~CurrentDevice() {
    if (restore_) log_release_failure("cudaSetDevice", cudaSetDevice(previous_));
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int device_;
  int previous_ = -1;
  bool restore_ = false;
};

class CudaDeviceBatchEngine final : public DeviceBatchEngine {
 public:
  CudaDeviceBatchEngine(int device, bool float16_output) : device_(device) {
    CurrentDevice current(device_);
    if (float16_output) {
      cudaDeviceProp properties{};
      STRIDER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_),
                         "reading the properties of device " + std::to_string(device_));
      const int capability = properties.major * 10 + properties.minor;
      STRIDER_REQUIRE(capability >= 53,
                      "float16 device batches need a GPU of compute capability 5.3 or newer; device " +
                          std::to_string(device_) + " (" + properties.name + ") is " +
                          std::to_string(properties.major) + "." + std::to_string(properties.minor));
    }
    copy_stream_ = make_stream();
    release_stream_ = make_stream();
  }
  ~CudaDeviceBatchEngine() override { finish(); }

  std::string name() const override { return "cuda"; }
  int device() const override { return device_; }
  std::shared_ptr<HostAllocator> host_allocator() const override { return make_pinned_allocator(); }

  void create_slots(int count) override {
    CurrentDevice current(device_);
    slots_.resize(static_cast<std::size_t>(count));
    for (Slot& slot : slots_) {
      slot.ready = make_event(false);
      slot.released = make_event(false);
    }
  }

  void prepare(const ElementConversion& conversion) override {
    if (!conversion.normalizes()) return;
    if (conversion.feature_means() == uploaded_means_ && conversion.feature_stddevs() == uploaded_stddevs_) return;
    CurrentDevice current(device_);
    // Kernels already enqueued may still read the old statistics.
    STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()), "finishing the batch copies in flight");
    uploaded_means_.clear();
    uploaded_stddevs_.clear();
    const std::size_t bytes = conversion.feature_means().size() * sizeof(float);
    means_ = allocate_device(bytes);
    stddevs_ = allocate_device(bytes);
    // On the copy stream, which the conversion kernels that read them run on.
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(means_.get(), conversion.feature_means().data(), bytes, cudaMemcpyHostToDevice,
                                       copy_stream_.get()),
                       "copying the normalization's means to device " + std::to_string(device_));
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(stddevs_.get(), conversion.feature_stddevs().data(), bytes,
                                       cudaMemcpyHostToDevice, copy_stream_.get()),
                       "copying the normalization's standard deviations to device " + std::to_string(device_));
    uploaded_means_ = conversion.feature_means();
    uploaded_stddevs_ = conversion.feature_stddevs();
  }

  std::byte* copy(int index, const BatchInput& host, const SlotLayout& layout,
                  const ElementConversion* conversion) override {
    CurrentDevice current(device_);
    Slot& slot = slots_[static_cast<std::size_t>(index)];
    cudaStream_t stream = copy_stream_.get();
    if (layout.total > slot.bytes) grow(slot, layout.total);
    if (conversion != nullptr && layout.input_bytes > staging_bytes_) grow_staging(layout.input_bytes);
    note_pageable(host);
    auto* base = static_cast<std::byte*>(slot.memory.get());
    const std::string hint =
        " of a batch of " + std::to_string(host.count) + " samples to device " + std::to_string(device_);
    try {
      if (conversion != nullptr && layout.input_bytes > 0) {
        STRIDER_CUDA_CHECK(
            cudaMemcpyAsync(staging_.get(), host.samples, layout.input_bytes, cudaMemcpyHostToDevice, stream),
            "copying " + std::to_string(layout.input_bytes) + " bytes of samples" + hint);
      }
      wait_for_release(slot);
      if (conversion != nullptr) {
        launch_element_conversion(stream, *conversion, static_cast<const std::byte*>(staging_.get()), host.count,
                                  static_cast<const float*>(means_.get()), static_cast<const float*>(stddevs_.get()),
                                  base);
      } else if (layout.input_bytes > 0) {
        STRIDER_CUDA_CHECK(cudaMemcpyAsync(base, host.samples, layout.input_bytes, cudaMemcpyHostToDevice, stream),
                           "copying " + std::to_string(layout.input_bytes) + " bytes of samples" + hint);
      }
      if (layout.label_bytes > 0) {
        STRIDER_CUDA_CHECK(
            cudaMemcpyAsync(base + layout.labels_at, host.labels, layout.label_bytes, cudaMemcpyHostToDevice, stream),
            "copying the labels" + hint);
      }
      if (layout.offset_bytes > 0) {
        STRIDER_CUDA_CHECK(cudaMemcpyAsync(base + layout.offsets_at, host.offsets, layout.offset_bytes,
                                           cudaMemcpyHostToDevice, stream),
                           "copying the token offsets" + hint);
      }
      STRIDER_CUDA_CHECK(cudaEventRecord(slot.ready.get(), stream), "recording the end of a batch's copy");
    } catch (...) {
      // Copies already enqueued read the caller's host memory, which may go away with the error.
      log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(stream));
      throw;
    }
    return base;
  }

  DeviceEvent ready(int index) const override { return slots_[static_cast<std::size_t>(index)].ready.get(); }

  void release(int index, DeviceEvent done) override {
    Slot& slot = slots_[static_cast<std::size_t>(index)];
    slot.release_pending = false;
    if (done == nullptr) return;
    CurrentDevice current(device_);
    STRIDER_CUDA_CHECK(cudaStreamWaitEvent(release_stream_.get(), done, 0),
                       "ordering a device slot's reuse after the trainer's release event");
    STRIDER_CUDA_CHECK(cudaEventRecord(slot.released.get(), release_stream_.get()), "recording a slot's release");
    slot.release_pending = true;
  }

  bool copy_finished(int index) override {
    CurrentDevice current(device_);
    const cudaError_t state = cudaEventQuery(slots_[static_cast<std::size_t>(index)].ready.get());
    if (state == cudaErrorNotReady) return false;
    STRIDER_CUDA_CHECK(state, "asking whether a batch's copy has finished");
    return true;
  }

  void wait_for_copy(int index) override {
    CurrentDevice current(device_);
    STRIDER_CUDA_CHECK(cudaEventSynchronize(slots_[static_cast<std::size_t>(index)].ready.get()),
                       "waiting for a batch's copy to device " + std::to_string(device_));
  }

  void synchronize() override {
    CurrentDevice current(device_);
    STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()), "waiting for the batch copies to finish");
  }

  void finish() noexcept override {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device_) != cudaSuccess) return;
    if (copy_stream_) log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(copy_stream_.get()));
    for (Slot& slot : slots_) {
      if (slot.release_pending) log_release_failure("cudaEventSynchronize", cudaEventSynchronize(slot.released.get()));
      slot.release_pending = false;
    }
    if (release_stream_) log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(release_stream_.get()));
    if (previous != device_) log_release_failure("cudaSetDevice", cudaSetDevice(previous));
  }

 private:
  struct Slot {
    DeviceMemory memory;
    std::size_t bytes = 0;
    CudaEvent ready;
    CudaEvent released;
    bool release_pending = false;  ///< `released` was recorded and no copy waited for it yet
  };

  // Makes the copy stream wait for the slot's release event (once per release).
  void wait_for_release(Slot& slot) {
    if (!slot.release_pending) return;
    STRIDER_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), slot.released.get(), 0),
                       "ordering a batch's copy after the release of its slot");
    slot.release_pending = false;
  }

  // Replaces the slot's memory by a larger one, once nothing reads or writes the old one.
  void grow(Slot& slot, std::size_t bytes) {
    if (slot.release_pending) {
      STRIDER_CUDA_CHECK(cudaEventSynchronize(slot.released.get()), "waiting for the trainer to release a slot");
      slot.release_pending = false;
    }
    STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()), "finishing the batch copies in flight");
    slot.memory.reset();
    slot.bytes = 0;
    const std::size_t grown = bytes + bytes / 4;
    slot.memory = allocate_device(grown);
    slot.bytes = grown;
  }

  void grow_staging(std::size_t bytes) {
    STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()), "finishing the batch copies in flight");
    staging_.reset();
    staging_bytes_ = 0;
    const std::size_t grown = bytes + bytes / 4;
    staging_ = allocate_device(grown);
    staging_bytes_ = grown;
  }

  // Says once when batches come from pageable memory: their copies then block the host.
  void note_pageable(const BatchInput& host) {
    if (noted_memory_ || host.samples == nullptr) return;
    cudaPointerAttributes attributes{};
    STRIDER_CUDA_CHECK(cudaPointerGetAttributes(&attributes, host.samples), "asking whether a batch is pinned");
    if (attributes.type != cudaMemoryTypeHost) {
      log_info(
          "device batches: batches are in pageable host memory, so their copies cannot overlap the trainer's "
          "kernels; give the Loader the allocator of DeviceBatches::host_allocator()");
    }
    noted_memory_ = true;
  }

  int device_;
  CudaStream copy_stream_;
  CudaStream release_stream_;
  std::vector<Slot> slots_;
  DeviceMemory staging_;
  std::size_t staging_bytes_ = 0;
  DeviceMemory means_;
  DeviceMemory stddevs_;
  std::vector<float> uploaded_means_;
  std::vector<float> uploaded_stddevs_;
  bool noted_memory_ = false;
};

}  // namespace

std::unique_ptr<DeviceBatchEngine> make_cuda_device_batch_engine(int device, bool float16_output) {
  return std::make_unique<CudaDeviceBatchEngine>(device, float16_output);
}

}  // namespace strider::detail
