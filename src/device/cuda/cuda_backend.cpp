// The CUDA backend: binding, two streams, double-buffered batch slots, the models' kernels, the
// gradient all-reduce (NCCL, or MPI through host memory when ranks share a device) and statistics.
//
// Streams and events, per step k (the trainer calls stage(batch k+1) before forward_backward(k)):
//   copy stream:    [wait slot.released] copy_start  H2D samples, labels, offsets  copy_done
//   compute stream: [wait slot.copy_done] compute_start  kernels  compute_end  slot.released  D2H sums
// forward_backward returns the batch's sums, so it synchronizes the compute stream at its end; the
// copy of batch k+1 (already on the copy stream) runs while step k computes.
#include "strider/device/cuda_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "device/batch_checks.hpp"
#include "device/cuda/cuda_check.hpp"
#include "device/cuda/cuda_handles.hpp"
#include "device/cuda/cuda_kernels.cuh"
#include "device/nccl_wait.hpp"
#include "strider/core/log.hpp"
#include "strider/device/gpu_binding.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/device/pinned_allocator.hpp"

namespace strider {
namespace detail {
namespace {

constexpr std::size_t slot_alignment = 256;
constexpr std::size_t interval_history = 256;

std::size_t align_up(std::size_t bytes) {
  return (bytes + slot_alignment - 1) / slot_alignment * slot_alignment;
}

/// Device memory that grows on demand (contents are not kept across growth).
class DeviceScratch {
 public:
  template <typename T>
  T* get(std::int64_t count, const char* what) {
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T);
    if (bytes > bytes_) {
      memory_.reset();
      bytes_ = 0;
      memory_ = allocate_device(bytes + bytes / 4);
      bytes_ = bytes + bytes / 4;
      (void)what;
    }
    return static_cast<T*>(memory_.get());
  }

 private:
  DeviceMemory memory_;
  std::size_t bytes_ = 0;
};

/// Pinned host memory that grows on demand.
class PinnedScratch {
 public:
  template <typename T>
  T* get(std::int64_t count) {
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T);
    if (bytes > bytes_) {
      memory_.reset();
      bytes_ = 0;
      memory_ = allocate_pinned(bytes + bytes / 4);
      bytes_ = bytes + bytes / 4;
    }
    return static_cast<T*>(memory_.get());
  }

 private:
  PinnedMemory memory_;
  std::size_t bytes_ = 0;
};

/// What identifies a batch handed to stage() and later to forward_backward()/predict().
struct BatchKey {
  const std::byte* samples = nullptr;
  ElementType type = ElementType::float32;
  std::int64_t count = 0;
  std::int64_t features = 0;
  const std::int32_t* labels = nullptr;
  const std::int64_t* offsets = nullptr;

  explicit BatchKey(const BatchInput& input)
      : samples(input.samples),
        type(input.type),
        count(input.count),
        features(input.features),
        labels(input.labels),
        offsets(input.offsets) {}
  BatchKey() = default;
  bool operator==(const BatchKey& other) const {
    return samples == other.samples && type == other.type && count == other.count && features == other.features &&
           labels == other.labels && offsets == other.offsets;
  }
};

/// The bytes of a checked batch.
struct BatchBytes {
  std::int64_t elements = 0;  ///< sample elements (count * features, or tokens)
  std::size_t samples = 0;
  std::size_t labels = 0;
  std::size_t offsets = 0;
  std::size_t total() const { return align_up(samples) + align_up(labels) + align_up(offsets); }
};

/// One device buffer for a batch, filled on the copy stream.
struct Slot {
  DeviceMemory memory;
  std::size_t bytes = 0;
  std::byte* samples = nullptr;
  std::int32_t* labels = nullptr;
  std::int64_t* offsets = nullptr;
  CudaEvent copy_start;
  CudaEvent copy_done;
  CudaEvent released;  ///< recorded on the compute stream after the last kernel that read it
  bool released_recorded = false;
  bool staged = false;  ///< holds a batch that no step has consumed yet
  BatchKey key;
  std::int64_t serial = -1;  ///< the backend's serial number of the batch in it
  std::int64_t stage_order = 0;
  std::size_t copied_bytes = 0;
};

enum class ReduceMode { none, local, nccl, mpi_host };

const char* reduce_mode_name(ReduceMode mode) {
  switch (mode) {
    case ReduceMode::local:
      return "local";
    case ReduceMode::nccl:
      return "nccl";
    case ReduceMode::mpi_host:
      return "mpi-host";
    case ReduceMode::none:
      break;
  }
  return "";
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

/// The CUDA backend (see include/strider/device/cuda_backend.hpp). One thread at a time.
class CudaBackend final : public Backend {
 public:
  CudaBackend(const Communicator& comm, bool allow_shared_device, double nccl_timeout_s);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  void initialize(const ModelConfig& config) override;
  const ModelConfig& config() const override { return config_; }
  std::int64_t parameter_count() const override { return parameter_count_; }
  std::vector<float> parameters() const override { return download(parameters_.get(), "parameters"); }
  void set_parameters(const std::vector<float>& parameters) override {
    upload(parameters, parameters_.get(), "parameters");
  }
  std::vector<float> gradients() const override { return download(gradients_.get(), "gradients"); }
  void zero_gradients() override;
  void stage(const BatchInput& next) override;
  StepResult forward_backward(const BatchInput& input) override;
  /// Collective over comm: every rank must call.
  void all_reduce_gradients(const Communicator& comm, std::int64_t global_count) override;
  void scale_gradients(std::int64_t count) override;
  void apply_sgd(float learning_rate, float momentum) override;
  std::vector<float> optimizer_state() const override { return download(velocity_.get(), "optimizer state"); }
  void set_optimizer_state(const std::vector<float>& state) override {
    upload(state, velocity_.get(), "optimizer state");
  }
  void predict(const BatchInput& input, std::int32_t* predictions) override;

  /// Collective over comm: connects now unless already connected to comm.
  void connect(const Communicator& comm) override {
    activate();
    if (reduce_mode_ == ReduceMode::none || connected_comm_ != comm.native() || connected_size_ != comm.size()) {
      build_reduction(comm);
    }
  }
  std::shared_ptr<HostAllocator> host_allocator() const override { return make_pinned_allocator(); }
  bool overlaps_copies() const override { return true; }

  CudaBackendStats stats() const;
  void reset_stats();

 private:
  void activate() const;
  void require_initialized(const char* what) const;
  std::vector<float> download(const void* device, const char* what) const;
  void upload(const std::vector<float>& values, void* device, const char* what);
  BatchBytes check_batch(const BatchInput& input, bool need_labels) const;
  Slot& slot_for_copy();
  void copy_to_slot(Slot& slot, const BatchInput& input, const BatchBytes& bytes);
  Slot& acquire(const BatchInput& input, const BatchBytes& bytes);
  const float* forward(const Slot& slot, std::int64_t count, std::int64_t elements);
  void backward(const Slot& slot, std::int64_t count, std::int64_t elements, const float* logits);
  void finish_step(Slot& slot);
  void synchronize_compute(const char* what) const;
  void collect_timings() const;
  void build_reduction(const Communicator& comm);
  void wait_for_nccl(const char* what);
  NcclPoll poll_async_error(const char* what);
  NcclWaitHooks nccl_hooks(std::function<NcclPoll()> poll, int pause_us);
  void abort_nccl() noexcept;
  void close_nccl(double timeout_s) noexcept;
  float* gradient_pointer() { return static_cast<float*>(gradients_.get()); }
  const float* parameter_pointer() const { return static_cast<const float*>(parameters_.get()); }

  int device_ = -1;
  int local_rank_ = 0;
  bool allow_shared_device_ = false;
  double nccl_timeout_s_ = 0.0;
  DeviceIdentity identity_;
  std::string device_name_;

  CudaStream copy_stream_;
  CudaStream compute_stream_;
  CudaEvent origin_;
  CudaEvent compute_start_;
  CudaEvent compute_end_;
  mutable CudaEvent update_start_;  // SGD / all-reduce timings, collected at the next synchronization
  mutable CudaEvent update_end_;
  mutable bool update_pending_ = false;
  mutable bool update_is_reduce_ = false;

  ModelConfig config_;
  bool initialized_ = false;
  std::int64_t parameter_count_ = 0;
  std::vector<ParameterBlock> layout_;
  DeviceMemory parameters_;
  DeviceMemory gradients_;
  DeviceMemory velocity_;

  Slot slots_[2];
  std::int64_t next_serial_ = 0;
  std::int64_t next_stage_order_ = 0;
  bool warned_pageable_ = false;

  DeviceScratch inputs_, hidden_, hidden_gradients_, logits_, logit_gradients_, losses_, correct_, buckets_,
      predictions_;
  PinnedScratch host_losses_, host_correct_, host_predictions_, host_gradients_;

  ReduceMode reduce_mode_ = ReduceMode::none;
  MPI_Comm connected_comm_ = MPI_COMM_NULL;
  int connected_size_ = 0;
  NcclComm nccl_;  // closed by the destructor before streams and memory go

  mutable CudaBackendStats stats_;
};

CudaBackend::CudaBackend(const Communicator& comm, bool allow_shared_device, double nccl_timeout_s)
    : local_rank_(comm.local_rank()), allow_shared_device_(allow_shared_device), nccl_timeout_s_(nccl_timeout_s) {
  int count = 0;
  STRIDER_CUDA_CHECK(cudaGetDeviceCount(&count), "counting CUDA devices");
  device_ = choose_device(local_rank_, count);
  STRIDER_CUDA_CHECK(cudaSetDevice(device_), "binding device " + std::to_string(device_) + " for node-local rank " +
                                                 std::to_string(local_rank_) + " of " +
                                                 std::to_string(comm.local_size()));
  cudaDeviceProp properties{};
  STRIDER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_),
                     "reading the properties of device " + std::to_string(device_));
  device_name_ = properties.name;
  identity_ = make_device_identity(host_name(), reinterpret_cast<const unsigned char*>(properties.uuid.bytes), device_);
  copy_stream_ = make_stream();
  compute_stream_ = make_stream();
  origin_ = make_event(true);
  compute_start_ = make_event(true);
  compute_end_ = make_event(true);
  update_start_ = make_event(true);
  update_end_ = make_event(true);
  for (Slot& slot : slots_) {
    slot.copy_start = make_event(true);
    slot.copy_done = make_event(true);
    slot.released = make_event(false);
  }
  stats_.device = device_;
  stats_.device_name = device_name_;
  stats_.device_uuid = device_uuid_text(identity_.uuid);
  log_info("cuda backend: node-local rank ", local_rank_, " of ", comm.local_size(), " -> device ", device_, " of ",
           count, " (", device_name_, ", ", stats_.device_uuid, ")");
}

CudaBackend::~CudaBackend() {
  // Never throws: errors are logged (and CUDA's unloading at exit tolerated) by the handles.
  close_nccl(std::min(nccl_timeout_s_ > 0 ? nccl_timeout_s_ : 10.0, 10.0));
  if (cudaSetDevice(device_) == cudaSuccess) {
    if (compute_stream_) log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(compute_stream_.get()));
    if (copy_stream_) log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(copy_stream_.get()));
  }
}

void CudaBackend::activate() const {
  STRIDER_CUDA_CHECK(cudaSetDevice(device_), "making device " + std::to_string(device_) + " current");
}

void CudaBackend::require_initialized(const char* what) const {
  if (!initialized_) STRIDER_THROW(UsageError, std::string("CudaBackend::") + what + " called before initialize()");
  activate();
}

void CudaBackend::synchronize_compute(const char* what) const {
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(compute_stream_.get()), what);
  collect_timings();
}

void CudaBackend::initialize(const ModelConfig& config) {
  validate_model_config(config);
  activate();
  if (initialized_) synchronize_compute("finishing the previous model's work");
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()), "finishing pending batch copies");
  layout_ = parameter_layout(config);
  parameter_count_ = strider::parameter_count(config);
  const std::size_t bytes = static_cast<std::size_t>(parameter_count_) * sizeof(float);
  parameters_ = allocate_device(bytes);
  gradients_ = allocate_device(bytes);
  velocity_ = allocate_device(bytes);
  config_ = config;
  initialized_ = true;
  upload(initial_parameters(config), parameters_.get(), "parameters");
  STRIDER_CUDA_CHECK(cudaMemsetAsync(gradients_.get(), 0, bytes, compute_stream_.get()), "zeroing the gradients");
  STRIDER_CUDA_CHECK(cudaMemsetAsync(velocity_.get(), 0, bytes, compute_stream_.get()), "zeroing the momentum");
  for (Slot& slot : slots_) {
    slot.staged = false;
    slot.released_recorded = false;
  }
  update_pending_ = false;
  STRIDER_CUDA_CHECK(cudaEventRecord(origin_.get(), compute_stream_.get()), "recording the timing origin");
  synchronize_compute("initializing the model on the device");
  reset_stats();
}

std::vector<float> CudaBackend::download(const void* device, const char* what) const {
  require_initialized(what);
  std::vector<float> values(static_cast<std::size_t>(parameter_count_));
  STRIDER_CUDA_CHECK(cudaMemcpyAsync(values.data(), device, values.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                     compute_stream_.get()),
                     std::string("copying the ") + what + " to the host");
  synchronize_compute("waiting for the copy to the host");
  return values;
}

void CudaBackend::upload(const std::vector<float>& values, void* device, const char* what) {
  require_initialized(what);
  STRIDER_REQUIRE(static_cast<std::int64_t>(values.size()) == parameter_count_,
                  std::string("set ") + what + ": expected " + std::to_string(parameter_count_) + " values, got " +
                      std::to_string(values.size()));
  STRIDER_CUDA_CHECK(cudaMemcpyAsync(device, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice,
                                     compute_stream_.get()),
                     std::string("copying the ") + what + " to the device");
  synchronize_compute("waiting for the copy to the device");  // `values` is pageable and may go away
}

void CudaBackend::zero_gradients() {
  require_initialized("zero_gradients");
  STRIDER_CUDA_CHECK(cudaMemsetAsync(gradients_.get(), 0, static_cast<std::size_t>(parameter_count_) * sizeof(float),
                                     compute_stream_.get()),
                     "zeroing the gradients");
}

// The CPU models' checks (src/device/batch_checks.hpp), on the host before anything is copied.
BatchBytes CudaBackend::check_batch(const BatchInput& input, bool need_labels) const {
  BatchBytes bytes;
  if (config_.kind == "bag") {
    detail::check_token_batch(input);
    bytes.elements = input.count == 0 ? 0 : input.offsets[input.count] - input.offsets[0];
    bytes.offsets = static_cast<std::size_t>(input.count + 1) * sizeof(std::int64_t);
  } else {
    detail::check_feature_batch(input, config_.features);
    bytes.elements = input.count * config_.features;
  }
  STRIDER_REQUIRE(bytes.elements == 0 || input.samples != nullptr, "a batch of samples without data");
  bytes.samples = static_cast<std::size_t>(bytes.elements) * element_bytes(input.type);
  if (need_labels) {
    if (input.count > 0 && input.labels == nullptr) {
      STRIDER_THROW(UsageError, "training needs labels, but the batch has none (does the file have a labels dataset?)");
    }
    for (std::int64_t i = 0; i < input.count; ++i) {
      const std::int32_t label = input.labels[i];
      if (label < 0 || label >= config_.num_classes) {
        STRIDER_THROW(DataError, "label " + std::to_string(label) + " of batch row " + std::to_string(i) +
                                     " is outside 0.." + std::to_string(config_.num_classes - 1) + " (the model has " +
                                     std::to_string(config_.num_classes) + " classes)");
      }
    }
  }
  if (input.labels != nullptr) bytes.labels = static_cast<std::size_t>(input.count) * sizeof(std::int32_t);
  return bytes;
}

Slot& CudaBackend::slot_for_copy() {
  // A slot that holds no unconsumed batch; otherwise the one staged first (its batch will be copied
  // again when a step asks for it).
  Slot* best = nullptr;
  for (Slot& slot : slots_) {
    if (!slot.staged && (best == nullptr || slot.serial < best->serial)) best = &slot;
  }
  if (best != nullptr) return *best;
  best = &slots_[0];
  for (Slot& slot : slots_) {
    if (slot.stage_order < best->stage_order) best = &slot;
  }
  log_debug("cuda backend: both device slots held staged batches; dropping the older one");
  return *best;
}

void CudaBackend::copy_to_slot(Slot& slot, const BatchInput& input, const BatchBytes& bytes) {
  cudaStream_t copy = copy_stream_.get();
  if (bytes.total() > slot.bytes) {
    // The slot grows: nothing may still read or write it.
    if (slot.released_recorded)
      STRIDER_CUDA_CHECK(cudaEventSynchronize(slot.released.get()), "waiting for a batch slot");
    STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy), "waiting for pending batch copies");
    slot.memory.reset();
    slot.bytes = 0;
    const std::size_t grown = align_up(bytes.total() + bytes.total() / 4);
    slot.memory = allocate_device(grown);
    slot.bytes = grown;
  }
  auto* base = static_cast<std::byte*>(slot.memory.get());
  slot.samples = base;
  slot.labels = reinterpret_cast<std::int32_t*>(base + align_up(bytes.samples));
  slot.offsets = reinterpret_cast<std::int64_t*>(base + align_up(bytes.samples) + align_up(bytes.labels));

  if (!warned_pageable_ && bytes.samples > 0) {
    cudaPointerAttributes attributes{};
    STRIDER_CUDA_CHECK(cudaPointerGetAttributes(&attributes, input.samples), "asking whether a batch is pinned");
    if (attributes.type != cudaMemoryTypeHost) {
      log_info(
          "cuda backend: batches are in pageable host memory, so their copies cannot overlap the kernels; "
          "allocate them with make_pinned_allocator()");
    }
    warned_pageable_ = true;
  }

  if (slot.released_recorded) {
    STRIDER_CUDA_CHECK(cudaStreamWaitEvent(copy, slot.released.get(), 0), "ordering a copy after the slot's last step");
  }
  STRIDER_CUDA_CHECK(cudaEventRecord(slot.copy_start.get(), copy), "recording a copy's start");
  const std::string hint = " of a batch of " + std::to_string(input.count) + " samples to the device";
  if (bytes.samples > 0) {
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(slot.samples, input.samples, bytes.samples, cudaMemcpyHostToDevice, copy),
                       "copying " + std::to_string(bytes.samples) + " bytes of samples" + hint);
  }
  if (bytes.labels > 0) {
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(slot.labels, input.labels, bytes.labels, cudaMemcpyHostToDevice, copy),
                       "copying the labels" + hint);
  }
  if (bytes.offsets > 0) {
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(slot.offsets, input.offsets, bytes.offsets, cudaMemcpyHostToDevice, copy),
                       "copying the token offsets" + hint);
  }
  STRIDER_CUDA_CHECK(cudaEventRecord(slot.copy_done.get(), copy), "recording a copy's end");
  slot.key = BatchKey(input);
  slot.serial = next_serial_++;
  slot.copied_bytes = bytes.samples + bytes.labels + bytes.offsets;
}

void CudaBackend::stage(const BatchInput& next) {
  require_initialized("stage");
  if (next.count <= 0) return;
  for (const Slot& slot : slots_) {
    if (slot.staged && slot.key == BatchKey(next)) return;
  }
  const BatchBytes bytes = check_batch(next, false);
  Slot& slot = slot_for_copy();
  copy_to_slot(slot, next, bytes);
  slot.staged = true;
  slot.stage_order = next_stage_order_++;
}

Slot& CudaBackend::acquire(const BatchInput& input, const BatchBytes& bytes) {
  for (Slot& slot : slots_) {
    if (slot.staged && slot.key == BatchKey(input)) {
      ++stats_.staged_hits;
      return slot;
    }
  }
  Slot& slot = slot_for_copy();
  copy_to_slot(slot, input, bytes);
  return slot;
}

const float* CudaBackend::forward(const Slot& slot, std::int64_t count, std::int64_t elements) {
  cudaStream_t stream = compute_stream_.get();
  const float* p = parameter_pointer();
  const std::int64_t classes = config_.num_classes;
  float* logits = logits_.get<float>(count * classes, "logits");
  if (config_.kind == "bag") {
    const std::int64_t width = config_.embed_dim;
    auto* buckets = buckets_.get<std::int64_t>(elements, "token buckets");
    float* means = hidden_.get<float>(count * width, "mean embeddings");
    kernels::tokens_to_buckets(stream, slot.samples, slot.key.type, elements, config_.vocab, buckets);
    kernels::bag_mean(stream, p + layout_[0].offset, width, buckets, slot.offsets, count, means);
    kernels::affine_forward(stream, means, count, width, p + layout_[1].offset, p + layout_[2].offset, classes, false,
                            logits);
    return logits;
  }
  float* x = inputs_.get<float>(count * config_.features, "float samples");
  kernels::convert_to_float(stream, slot.samples, slot.key.type, count * config_.features, x);
  if (config_.kind == "softmax") {
    kernels::affine_forward(stream, x, count, config_.features, p + layout_[0].offset, p + layout_[1].offset, classes,
                            false, logits);
  } else {  // mlp
    float* hidden = hidden_.get<float>(count * config_.hidden, "hidden activations");
    kernels::affine_forward(stream, x, count, config_.features, p + layout_[0].offset, p + layout_[1].offset,
                            config_.hidden, true, hidden);
    kernels::affine_forward(stream, hidden, count, config_.hidden, p + layout_[2].offset, p + layout_[3].offset,
                            classes, false, logits);
  }
  return logits;
}

void CudaBackend::backward(const Slot& slot, std::int64_t count, std::int64_t elements, const float* logits) {
  cudaStream_t stream = compute_stream_.get();
  const float* p = parameter_pointer();
  float* g = gradient_pointer();
  const int classes = config_.num_classes;
  float* logit_gradients = logit_gradients_.get<float>(count * classes, "logit gradients");
  kernels::cross_entropy(stream, logits, count, classes, slot.labels, losses_.get<double>(count, "losses"),
                         correct_.get<std::int32_t>(count, "correct flags"), logit_gradients);
  if (config_.kind == "softmax") {
    kernels::affine_parameter_gradients(stream, inputs_.get<float>(count * config_.features, "float samples"), count,
                                        config_.features, logit_gradients, classes, g + layout_[0].offset,
                                        g + layout_[1].offset);
  } else if (config_.kind == "mlp") {
    float* hidden = hidden_.get<float>(count * config_.hidden, "hidden activations");
    float* hidden_gradients = hidden_gradients_.get<float>(count * config_.hidden, "hidden gradients");
    kernels::affine_parameter_gradients(stream, hidden, count, config_.hidden, logit_gradients, classes,
                                        g + layout_[2].offset, g + layout_[3].offset);
    kernels::affine_input_gradients(stream, p + layout_[2].offset, count, config_.hidden, logit_gradients, classes,
                                    hidden, hidden_gradients);
    kernels::affine_parameter_gradients(stream, inputs_.get<float>(count * config_.features, "float samples"), count,
                                        config_.features, hidden_gradients, config_.hidden, g + layout_[0].offset,
                                        g + layout_[1].offset);
  } else {  // bag
    const std::int64_t width = config_.embed_dim;
    float* means = hidden_.get<float>(count * width, "mean embeddings");
    float* mean_gradients = hidden_gradients_.get<float>(count * width, "mean embedding gradients");
    kernels::affine_parameter_gradients(stream, means, count, width, logit_gradients, classes, g + layout_[1].offset,
                                        g + layout_[2].offset);
    kernels::affine_input_gradients(stream, p + layout_[1].offset, count, width, logit_gradients, classes, nullptr,
                                    mean_gradients);
    kernels::bag_embedding_gradients(stream, mean_gradients, width,
                                     buckets_.get<std::int64_t>(elements, "token buckets"), slot.offsets, count,
                                     g + layout_[0].offset);
  }
}

void CudaBackend::finish_step(Slot& slot) {
  cudaStream_t stream = compute_stream_.get();
  STRIDER_CUDA_CHECK(cudaEventRecord(compute_end_.get(), stream), "recording a step's end");
  STRIDER_CUDA_CHECK(cudaEventRecord(slot.released.get(), stream), "releasing a batch slot");
  slot.released_recorded = true;
  slot.staged = false;
}

StepResult CudaBackend::forward_backward(const BatchInput& input) {
  require_initialized("forward_backward");
  const BatchBytes bytes = check_batch(input, true);  // before anything changes
  StepResult result;
  if (input.count == 0) return result;
  const std::int64_t count = input.count;
  // Grow the scratch buffers while the compute stream is idle (growth frees device memory).
  synchronize_compute("finishing the previous update");
  Slot& slot = acquire(input, bytes);
  cudaStream_t stream = compute_stream_.get();
  STRIDER_CUDA_CHECK(cudaStreamWaitEvent(stream, slot.copy_done.get(), 0), "ordering a step after its batch's copy");
  STRIDER_CUDA_CHECK(cudaEventRecord(compute_start_.get(), stream), "recording a step's start");
  const float* logits = forward(slot, count, bytes.elements);
  backward(slot, count, bytes.elements, logits);
  finish_step(slot);

  auto* host_losses = host_losses_.get<double>(count);
  auto* host_correct = host_correct_.get<std::int32_t>(count);
  STRIDER_CUDA_CHECK(cudaMemcpyAsync(host_losses, losses_.get<double>(count, "losses"),
                                     static_cast<std::size_t>(count) * sizeof(double), cudaMemcpyDeviceToHost, stream),
                     "copying the losses to the host");
  STRIDER_CUDA_CHECK(
      cudaMemcpyAsync(host_correct, correct_.get<std::int32_t>(count, "correct flags"),
                      static_cast<std::size_t>(count) * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream),
      "copying the correct flags to the host");
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(stream), "running a training step on the device");

  // Sums in row order, like the CPU backend.
  for (std::int64_t i = 0; i < count; ++i) {
    result.loss_sum += host_losses[i];
    result.correct += host_correct[i];
  }
  result.count = count;

  float copy_ms = 0.0f, step_ms = 0.0f, copy_start_ms = 0.0f, step_start_ms = 0.0f;
  STRIDER_CUDA_CHECK(cudaEventElapsedTime(&copy_start_ms, origin_.get(), slot.copy_start.get()), "timing a copy");
  STRIDER_CUDA_CHECK(cudaEventElapsedTime(&copy_ms, slot.copy_start.get(), slot.copy_done.get()), "timing a copy");
  STRIDER_CUDA_CHECK(cudaEventElapsedTime(&step_start_ms, origin_.get(), compute_start_.get()), "timing a step");
  STRIDER_CUDA_CHECK(cudaEventElapsedTime(&step_ms, compute_start_.get(), compute_end_.get()), "timing a step");
  auto remember = [](std::vector<TimedInterval>& intervals, TimedInterval interval) {
    if (intervals.size() == interval_history) intervals.erase(intervals.begin());
    intervals.push_back(interval);
  };
  remember(stats_.copy_intervals, TimedInterval{copy_start_ms, copy_start_ms + copy_ms, slot.serial});
  remember(stats_.compute_intervals, TimedInterval{step_start_ms, step_start_ms + step_ms, slot.serial});
  stats_.h2d_bytes += static_cast<std::int64_t>(slot.copied_bytes);
  stats_.h2d_ms += copy_ms;
  stats_.kernel_ms += step_ms;
  ++stats_.steps;
  return result;
}

void CudaBackend::predict(const BatchInput& input, std::int32_t* predictions) {
  require_initialized("predict");
  const BatchBytes bytes = check_batch(input, false);
  if (input.count == 0) return;
  const std::int64_t count = input.count;
  synchronize_compute("finishing the previous update");
  Slot& slot = acquire(input, bytes);
  cudaStream_t stream = compute_stream_.get();
  STRIDER_CUDA_CHECK(cudaStreamWaitEvent(stream, slot.copy_done.get(), 0), "ordering a prediction after its copy");
  STRIDER_CUDA_CHECK(cudaEventRecord(compute_start_.get(), stream), "recording a prediction's start");
  const float* logits = forward(slot, count, bytes.elements);
  auto* device_predictions = predictions_.get<std::int32_t>(count, "predictions");
  kernels::argmax_rows(stream, logits, count, config_.num_classes, device_predictions);
  finish_step(slot);
  auto* host_predictions = host_predictions_.get<std::int32_t>(count);
  STRIDER_CUDA_CHECK(
      cudaMemcpyAsync(host_predictions, device_predictions, static_cast<std::size_t>(count) * sizeof(std::int32_t),
                      cudaMemcpyDeviceToHost, stream),
      "copying the predictions to the host");
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(stream), "predicting on the device");
  std::memcpy(predictions, host_predictions, static_cast<std::size_t>(count) * sizeof(std::int32_t));
  float step_ms = 0.0f;
  STRIDER_CUDA_CHECK(cudaEventElapsedTime(&step_ms, compute_start_.get(), compute_end_.get()), "timing a prediction");
  stats_.kernel_ms += step_ms;
}

void CudaBackend::scale_gradients(std::int64_t count) {
  STRIDER_REQUIRE(count >= 0, "scale_gradients: negative sample count " + std::to_string(count));
  require_initialized("scale_gradients");
  if (count == 0) return;
  kernels::scale(compute_stream_.get(), gradient_pointer(), parameter_count_, 1.0f / static_cast<float>(count));
}

void CudaBackend::apply_sgd(float learning_rate, float momentum) {
  require_initialized("apply_sgd");
  synchronize_compute("finishing the gradients");  // collects the previous update's timing
  cudaStream_t stream = compute_stream_.get();
  STRIDER_CUDA_CHECK(cudaEventRecord(update_start_.get(), stream), "recording an update's start");
  kernels::sgd_momentum(stream, static_cast<float*>(parameters_.get()), gradient_pointer(),
                        static_cast<float*>(velocity_.get()), parameter_count_, learning_rate, momentum);
  STRIDER_CUDA_CHECK(cudaEventRecord(update_end_.get(), stream), "recording an update's end");
  update_pending_ = true;
  update_is_reduce_ = false;
}

// Called after the compute stream was synchronized: the pending update's events have completed.
void CudaBackend::collect_timings() const {
  if (!update_pending_) return;
  float ms = 0.0f;
  STRIDER_CUDA_CHECK(cudaEventElapsedTime(&ms, update_start_.get(), update_end_.get()), "timing an update");
  if (update_is_reduce_)
    stats_.all_reduce_ms += ms;
  else
    stats_.kernel_ms += ms;
  update_pending_ = false;
}

void CudaBackend::abort_nccl() noexcept {
  ncclComm_t comm = nccl_.release();
  if (comm != nullptr) {
    const ncclResult_t code = ncclCommAbort(comm);
    if (code != ncclSuccess) log_warn("ncclCommAbort failed: ", ncclGetErrorString(code));
  }
  reduce_mode_ = ReduceMode::none;
  connected_comm_ = MPI_COMM_NULL;
  connected_size_ = 0;
}

// Finalizes and destroys the NCCL communicator; if that fails or takes longer than timeout_s,
// aborts it instead. Never throws.
void CudaBackend::close_nccl(double timeout_s) noexcept {
  if (!nccl_) return;
  try {
    STRIDER_NCCL_CHECK(ncclCommFinalize(nccl_.get()), "finalizing the NCCL communicator");
    wait_for_nccl_operation(nccl_hooks([this] { return poll_async_error("finalizing the NCCL communicator"); }, 100),
                            timeout_s, "finalizing the NCCL communicator");
  } catch (const std::exception& error) {
    log_warn("cuda backend: ", error_message(error), "; aborting it");
    abort_nccl();
    return;
  }
  nccl_.reset();  // ncclCommDestroy
}

// One poll of the communicator's asynchronous state: done (ncclSuccess), running (ncclInProgress) or
// failed with NCCL's reason.
NcclPoll CudaBackend::poll_async_error(const char* what) {
  ncclResult_t state = ncclSuccess;
  STRIDER_NCCL_CHECK(ncclCommGetAsyncError(nccl_.get(), &state), what);
  if (state == ncclSuccess) return NcclPoll{NcclPoll::State::done, 0, ""};
  if (state == ncclInProgress) return NcclPoll{NcclPoll::State::running, 0, ""};
  std::string error = ncclGetErrorString(state);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') error += std::string(" (") + last + ")";
  return NcclPoll{NcclPoll::State::failed, static_cast<std::int64_t>(state), error};
}

// The steady clock, a sleep of pause_us between polls, and abort_nccl for a wait on this backend's
// communicator.
NcclWaitHooks CudaBackend::nccl_hooks(std::function<NcclPoll()> poll, int pause_us) {
  NcclWaitHooks hooks;
  hooks.poll = std::move(poll);
  hooks.now_s = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  hooks.pause = [pause_us] { std::this_thread::sleep_for(std::chrono::microseconds(pause_us)); };
  hooks.abort = [this] { abort_nccl(); };
  return hooks;
}

// Waits until a non-blocking NCCL call has finished enqueuing (or the communicator is ready); on an
// error or after the timeout aborts the communicator and throws NcclError.
void CudaBackend::wait_for_nccl(const char* what) {
  wait_for_nccl_operation(nccl_hooks([this, what] { return poll_async_error(what); }, 100), nccl_timeout_s_, what);
}

// Collective over comm: compares devices, then picks how gradients are reduced and builds NCCL.
void CudaBackend::build_reduction(const Communicator& comm) {
  if (nccl_) {
    log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(compute_stream_.get()));
    close_nccl(nccl_timeout_s_ > 0 ? nccl_timeout_s_ : 600.0);
  }
  reduce_mode_ = ReduceMode::none;
  const std::vector<DeviceIdentity> identities = comm.all_gather(identity_);
  check_device_sharing(identities, allow_shared_device_);  // the same decision on every rank
  connected_comm_ = comm.native();
  connected_size_ = comm.size();
  if (comm.size() == 1) {
    reduce_mode_ = ReduceMode::local;
  } else if (!ranks_sharing_devices(identities).empty()) {
    reduce_mode_ = ReduceMode::mpi_host;
    if (comm.is_root()) {
      log_info("cuda backend: ", describe_shared_devices(identities, ranks_sharing_devices(identities)),
               " (allowed); NCCL refuses two ranks on one device, so gradients are all-reduced with MPI through "
               "host memory");
    }
  } else {
    ncclUniqueId id{};
    comm.collective_try([&] {
      if (comm.is_root()) STRIDER_NCCL_CHECK(ncclGetUniqueId(&id), "creating the NCCL unique id");
    });
    comm.broadcast(reinterpret_cast<char*>(&id), static_cast<std::int64_t>(sizeof(id)));
    std::exception_ptr failure;
    try {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;  // so that a stuck init can be polled, timed out and aborted
      ncclComm_t raw = nullptr;
      const ncclResult_t code = ncclCommInitRankConfig(&raw, comm.size(), id, comm.rank(), &config);
      nccl_.reset(raw);
      if (code != ncclSuccess && code != ncclInProgress) {
        throw_nccl_error(code, "ncclCommInitRankConfig", relative_source_path(__FILE__), __LINE__,
                         "creating the NCCL communicator of " + std::to_string(comm.size()) + " ranks");
      }
      wait_for_nccl("creating the NCCL communicator");
    } catch (...) {
      failure = std::current_exception();
    }
    try {
      comm.agree(failure);  // every rank throws if any rank failed
    } catch (...) {
      abort_nccl();
      throw;
    }
    reduce_mode_ = ReduceMode::nccl;
    if (comm.is_root()) log_info("cuda backend: gradients all-reduced with NCCL over ", comm.size(), " ranks");
  }
  stats_.all_reduce = reduce_mode_name(reduce_mode_);
}

void CudaBackend::all_reduce_gradients(const Communicator& comm, std::int64_t global_count) {
  require_initialized("all_reduce_gradients");
  STRIDER_REQUIRE(global_count >= 0, "all_reduce_gradients: negative sample count " + std::to_string(global_count));
  connect(comm);
  synchronize_compute("finishing the gradients");
  cudaStream_t stream = compute_stream_.get();
  const auto count = static_cast<std::size_t>(parameter_count_);
  STRIDER_CUDA_CHECK(cudaEventRecord(update_start_.get(), stream), "recording an all-reduce's start");
  if (reduce_mode_ == ReduceMode::nccl) {
    try {
      STRIDER_NCCL_CHECK(
          ncclAllReduce(gradient_pointer(), gradient_pointer(), count, ncclFloat, ncclSum, nccl_.get(), stream),
          "all-reducing " + std::to_string(count * sizeof(float)) + " bytes of gradients");
      wait_for_nccl("enqueuing the gradient all-reduce");
      if (global_count > 0) scale_gradients(global_count);
      STRIDER_CUDA_CHECK(cudaEventRecord(update_end_.get(), stream), "recording an all-reduce's end");
      // Poll NCCL's asynchronous errors while the all-reduce runs, so that a failed peer ends in
      // an error (and ncclCommAbort) instead of a hang.
      wait_for_nccl_operation(nccl_hooks(
                                  [&] {
                                    const cudaError_t state = cudaStreamQuery(stream);
                                    if (state == cudaSuccess) return NcclPoll{NcclPoll::State::done, 0, ""};
                                    if (state != cudaErrorNotReady)
                                      STRIDER_CUDA_CHECK(state, "running the gradient all-reduce");
                                    NcclPoll poll = poll_async_error("polling the gradient all-reduce");
                                    if (poll.state == NcclPoll::State::done) poll.state = NcclPoll::State::running;
                                    return poll;
                                  },
                                  50),
                              nccl_timeout_s_, "the gradient all-reduce");
    } catch (...) {
      abort_nccl();  // no rank may hang on this communicator again
      throw;
    }
  } else {
    if (reduce_mode_ == ReduceMode::mpi_host) {
      auto* host = host_gradients_.get<float>(parameter_count_);
      STRIDER_CUDA_CHECK(
          cudaMemcpyAsync(host, gradient_pointer(), count * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "copying the gradients to the host for MPI");
      STRIDER_CUDA_CHECK(cudaStreamSynchronize(stream), "copying the gradients to the host for MPI");
      comm.all_reduce(host, parameter_count_, ReduceOp::sum);
      STRIDER_CUDA_CHECK(
          cudaMemcpyAsync(gradient_pointer(), host, count * sizeof(float), cudaMemcpyHostToDevice, stream),
          "copying the all-reduced gradients to the device");
    }
    if (global_count > 0) scale_gradients(global_count);
    STRIDER_CUDA_CHECK(cudaEventRecord(update_end_.get(), stream), "recording an all-reduce's end");
  }
  update_pending_ = true;
  update_is_reduce_ = true;
  synchronize_compute("finishing the gradient all-reduce");
}

CudaBackendStats CudaBackend::stats() const {
  if (initialized_) {
    activate();
    synchronize_compute("collecting the CUDA backend's timings");
  }
  return stats_;
}

void CudaBackend::reset_stats() {
  CudaBackendStats fresh;
  fresh.device = stats_.device;
  fresh.device_name = stats_.device_name;
  fresh.device_uuid = stats_.device_uuid;
  fresh.all_reduce = stats_.all_reduce;
  stats_ = std::move(fresh);
  update_pending_ = false;
}

namespace {
const CudaBackend& as_cuda(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  if (cuda == nullptr) STRIDER_THROW(UsageError, "the " + backend.name() + " backend is not the CUDA backend");
  return *cuda;
}
}  // namespace

}  // namespace detail

std::unique_ptr<Backend> make_cuda_backend(const Communicator& comm, bool allow_shared_device) {
  const GpuProbe probe = probe_gpus();
  if (probe.device_count == 0) STRIDER_THROW(UsageError, "the CUDA backend needs a working GPU: " + probe.reason);
  const CudaBackendFlags flags = cuda_backend_flags_from_environment();
  return std::make_unique<detail::CudaBackend>(comm, allow_shared_device || flags.allow_shared_device,
                                               flags.nccl_timeout_s);
}

CudaBackendStats cuda_backend_stats(const Backend& backend) {
  return detail::as_cuda(backend).stats();
}

void reset_cuda_backend_stats(Backend& backend) {
  const_cast<detail::CudaBackend&>(detail::as_cuda(backend)).reset_stats();
}

}  // namespace strider
