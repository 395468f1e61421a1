// The CUDA backend: binding, two streams, double-buffered batch slots, the models' kernels, the
// gradient all-reduce (NCCL, or MPI through host memory when ranks share a device) and statistics.
//
// Streams and events, per step k (a trainer calls stage(batch k+1) before forward_backward(k)):
//   copy stream:    [wait slot.released] copy_start  H2D samples, labels, offsets  copy_done
//   compute stream: [wait slot.copy_done] step_start  kernels  step_end  slot.released  D2H sums
//                   reduce_start  all-reduce, scale  reduce_end  sgd_start  SGD  sgd_end
// The host waits for the compute stream once per step: forward_backward returns the batch's sums, so
// it waits at its end. all_reduce_gradients (NCCL and single-rank) and apply_sgd only enqueue, so step
// k's all-reduce and update and step k+1's kernels run back to back, while the copy of batch k+1,
// staged on the copy stream, runs during step k. Scratch buffers are sized before a step enqueues
// anything (a growth waits for the queued work first). Every host wait polls NCCL while NCCL is in
// use, so that a failed peer ends in an error (and ncclCommAbort) instead of a hang.
#include "strider/device/cuda_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "comm/failure_notices.hpp"
#include "device/batch_checks.hpp"
#include "device/cuda/cuda_check.hpp"
#include "device/cuda/cuda_handles.hpp"
#include "device/cuda/cuda_kernels.cuh"
#include "device/cuda/dense_layers.hpp"
#include "device/cuda/element_conversion.cuh"
#include "device/nccl_wait.hpp"
#include "device/staging_slots.hpp"
#include "strider/core/log.hpp"
#include "strider/device/gpu_binding.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/device/pinned_allocator.hpp"

namespace strider {
namespace detail {
namespace {

constexpr std::size_t slot_alignment = 256;
constexpr std::size_t interval_history = 256;
constexpr int batch_slots = 2;

std::size_t align_up(std::size_t bytes) {
  return (bytes + slot_alignment - 1) / slot_alignment * slot_alignment;
}

/// Memory that grows on demand (contents are not kept across growth). A step reserves every buffer
/// it uses before it enqueues work, so that growth never frees memory a queued kernel still uses.
template <typename Memory, Memory (*allocate)(std::size_t)>
class Scratch {
 public:
  /// True when `bytes` do not fit: the caller lets queued work finish, then calls grow().
  bool needs_growth(std::size_t bytes) const noexcept { return bytes > bytes_; }
  void grow(std::size_t bytes) {
    memory_.reset();
    bytes_ = 0;
    memory_ = allocate(bytes + bytes / 4);
    bytes_ = bytes + bytes / 4;
  }
  /// The memory as `count` values of T; count * sizeof(T) must have been reserved.
  template <typename T>
  T* get(std::int64_t count) const {
    STRIDER_REQUIRE(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)) * sizeof(T) <= bytes_,
                    "cuda backend: a scratch buffer was used beyond what was reserved");
    return static_cast<T*>(memory_.get());
  }

 private:
  Memory memory_;
  std::size_t bytes_ = 0;
};
using DeviceScratch = Scratch<DeviceMemory, allocate_device>;
using PinnedScratch = Scratch<PinnedMemory, allocate_pinned>;

/// The bytes of a checked batch.
struct BatchBytes {
  std::int64_t elements = 0;  ///< sample elements (count * features, or tokens)
  std::size_t samples = 0;
  std::size_t labels = 0;
  std::size_t offsets = 0;
  std::size_t total() const { return align_up(samples) + align_up(labels) + align_up(offsets); }
};

/// One device buffer for a batch, filled on the copy stream. Which batch it holds, and whether that
/// batch is staged, is StagingSlots' business.
struct Slot {
  DeviceMemory memory;
  std::size_t bytes = 0;
  std::byte* samples = nullptr;
  std::int32_t* labels = nullptr;
  std::int64_t* offsets = nullptr;
  ElementType type = ElementType::float32;
  CudaEvent copy_start;
  CudaEvent copy_done;
  CudaEvent released;  ///< recorded on the compute stream after the last kernel that read it
  bool released_recorded = false;
  std::int64_t serial = -1;  ///< the backend's serial number of the batch in it
  std::size_t copied_bytes = 0;
};

/// Device time between two events on the compute stream, added to a total once both completed.
struct TimedSpan {
  CudaEvent start;
  CudaEvent end;
  bool pending = false;  ///< recorded, not yet added
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

}  // namespace

/// The CUDA backend (see include/strider/device/cuda_backend.hpp). One thread at a time.
class CudaBackend final : public Backend {
 public:
  CudaBackend(const Communicator& comm, bool allow_shared_device, double nccl_timeout_s, bool nccl_one_rank,
              CudaDense dense);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  int device() const override { return device_; }
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
  void unstage(const BatchInput& batch) noexcept override;
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
  void reserve_scratch(std::int64_t count, std::int64_t elements);
  void warn_if_pageable(const BatchInput& input, const BatchBytes& bytes);
  void copy_to_slot(int slot, const BatchInput& input, const BatchBytes& bytes, bool staged);
  int acquire(const BatchInput& input, const BatchBytes& bytes);
  void abandon_batches() noexcept;
  const float* forward(const Slot& slot, std::int64_t count, std::int64_t elements);
  void backward(const Slot& slot, std::int64_t count, std::int64_t elements, const float* logits);
  int begin_step(const BatchInput& input, const BatchBytes& bytes);
  void finish_step(int slot);
  void wait_compute(const char* what) const;
  void begin_span(TimedSpan& span, const char* what);
  void end_span(TimedSpan& span, const char* what);
  void collect_spans() const;
  void build_reduction(const Communicator& comm);
  void wait_for_nccl(const char* what);
  NcclPoll poll_async_error(const char* what);
  NcclPoll poll_compute_stream(const char* what) const;
  NcclWaitHooks nccl_hooks(std::function<NcclPoll()> poll) const;
  void tell_peers_unless_told(const std::string& reason) noexcept;
  void abort_nccl() noexcept;
  void close_nccl(double timeout_s) noexcept;
  float* gradient_pointer() { return static_cast<float*>(gradients_.get()); }
  const float* parameter_pointer() const { return static_cast<const float*>(parameters_.get()); }

  int device_ = -1;
  int local_rank_ = 0;
  bool allow_shared_device_ = false;
  bool nccl_one_rank_ = false;  // STRIDER_TEST_NCCL_ONE_RANK: NCCL even at one rank
  double nccl_timeout_s_ = 0.0;
  DeviceIdentity identity_;
  std::string device_name_;

  CudaStream copy_stream_;
  CudaStream compute_stream_;
  CudaEvent origin_;
  CudaEvent step_start_;
  CudaEvent step_end_;
  mutable TimedSpan reduce_span_;     // all-reduce and scaling, collected after the next host wait
  mutable TimedSpan sgd_span_;        // the SGD update, likewise
  std::optional<DenseLayers> dense_;  // the affine layers, on the compute stream

  ModelConfig config_;
  bool initialized_ = false;
  std::int64_t parameter_count_ = 0;
  std::vector<ParameterBlock> layout_;
  DeviceMemory parameters_;
  DeviceMemory gradients_;
  DeviceMemory velocity_;
  // Normalization of the inputs (config_.normalization): one mean and one standard deviation per
  // feature on the device, and the conversion of the last batch's element type.
  DeviceMemory input_means_, input_stddevs_;
  std::optional<ElementConversion> input_conversion_;

  Slot slots_[batch_slots];
  StagingSlots staging_{batch_slots};
  bool checked_pinned_ = false;

  DeviceScratch inputs_, hidden_, hidden_gradients_, logits_, logit_gradients_, losses_, correct_, buckets_,
      predictions_, partials_;
  PinnedScratch host_losses_, host_correct_, host_predictions_, host_gradients_;

  ReduceMode reduce_mode_ = ReduceMode::none;
  MPI_Comm connected_comm_ = MPI_COMM_NULL;
  int connected_size_ = 0;
  std::unique_ptr<FailureNotices> notices_;  // with NCCL: peers' failures, and ours to them
  NcclComm nccl_;                            // closed by the destructor before streams and memory go

  mutable CudaBackendStats stats_;
};

CudaBackend::CudaBackend(const Communicator& comm, bool allow_shared_device, double nccl_timeout_s, bool nccl_one_rank,
                         CudaDense dense)
    : local_rank_(comm.local_rank()),
      allow_shared_device_(allow_shared_device),
      nccl_one_rank_(nccl_one_rank),
      nccl_timeout_s_(nccl_timeout_s) {
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
  const std::string capability = std::to_string(properties.major) + "." + std::to_string(properties.minor);
  // Before any launch: a build without an image for this device fails here with one line, not at the
  // first kernel with "no kernel image is available".
  const cudaError_t image = kernels::kernel_image_status();
  if (image != cudaSuccess) {
    (void)cudaGetLastError();  // the query's error is not sticky: clear it
    STRIDER_THROW(CudaError,
                  "device " + std::to_string(device_) + " (" + device_name_ + ") has compute capability " + capability +
                      " but this build has kernels for CUDA architectures " STRIDER_CUDA_ARCHITECTURES " only (" +
                      cudaGetErrorString(image) + "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=" +
                      std::to_string(properties.major * 10 + properties.minor));
  }
  identity_ =
      make_device_identity(this_host_name(), reinterpret_cast<const unsigned char*>(properties.uuid.bytes), device_);
  copy_stream_ = make_stream();
  compute_stream_ = make_stream();
  dense_.emplace(dense, compute_stream_.get());
  origin_ = make_event(true);
  step_start_ = make_event(true);
  step_end_ = make_event(true);
  for (TimedSpan* span : {&reduce_span_, &sgd_span_}) {
    span->start = make_event(true);
    span->end = make_event(true);
  }
  for (Slot& slot : slots_) {
    slot.copy_start = make_event(true);
    slot.copy_done = make_event(true);
    slot.released = make_event(false);
  }
  stats_.device = device_;
  stats_.device_name = device_name_;
  stats_.device_uuid = device_uuid_text(identity_.uuid);
  log_info("cuda backend: node-local rank ", local_rank_, " of ", comm.local_size(), " -> device ", device_, " of ",
           count, " (", device_name_, ", ", stats_.device_uuid, ", compute capability ", capability,
           "; kernels built for " STRIDER_CUDA_ARCHITECTURES "; dense layers on ",
           dense == CudaDense::cublas ? "cuBLAS" : "strider's kernels", ")");
}

CudaBackend::~CudaBackend() {
  // Never throws: errors are logged (and CUDA's unloading at exit tolerated) by the handles.
  close_nccl(std::min(nccl_timeout_s_ > 0 ? nccl_timeout_s_ : 10.0, 10.0));
  notices_.reset();
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

// The one way the host waits for the compute stream. With NCCL it polls the stream and NCCL's
// asynchronous errors (and the peers' failure notices) instead of blocking in cudaStreamSynchronize,
// which would never return if a peer's failure left an all-reduce waiting.
void CudaBackend::wait_compute(const char* what) const {
  if (reduce_mode_ == ReduceMode::nccl && nccl_) {
    auto* self = const_cast<CudaBackend*>(this);  // an abort on failure changes the reduction state
    wait_for_nccl_operation(self->nccl_hooks([self, what] { return self->poll_compute_stream(what); }), nccl_timeout_s_,
                            what);
  } else {
    STRIDER_CUDA_CHECK(cudaStreamSynchronize(compute_stream_.get()), what);
  }
  collect_spans();
}

void CudaBackend::begin_span(TimedSpan& span, const char* what) {
  if (span.pending) wait_compute("timing the previous update");  // its events are about to be reused
  STRIDER_CUDA_CHECK(cudaEventRecord(span.start.get(), compute_stream_.get()), what);
}

void CudaBackend::end_span(TimedSpan& span, const char* what) {
  STRIDER_CUDA_CHECK(cudaEventRecord(span.end.get(), compute_stream_.get()), what);
  span.pending = true;
}

// Called after a host wait for the compute stream: the pending spans' events have completed.
void CudaBackend::collect_spans() const {
  auto collect = [](TimedSpan& span, double& total_ms) {
    if (!span.pending) return;
    float ms = 0.0f;
    STRIDER_CUDA_CHECK(cudaEventElapsedTime(&ms, span.start.get(), span.end.get()), "timing an update");
    total_ms += ms;
    span.pending = false;
  };
  collect(reduce_span_, stats_.all_reduce_ms);
  collect(sgd_span_, stats_.kernel_ms);
}

void CudaBackend::initialize(const ModelConfig& config) {
  validate_model_config(config);
  activate();
  if (initialized_) wait_compute("finishing the previous model's work");
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()), "finishing pending batch copies");
  layout_ = parameter_layout(config);
  parameter_count_ = strider::parameter_count(config);
  const std::size_t bytes = static_cast<std::size_t>(parameter_count_) * sizeof(float);
  parameters_ = allocate_device(bytes);
  gradients_ = allocate_device(bytes);
  velocity_ = allocate_device(bytes);
  config_ = config;
  initialized_ = true;
  input_conversion_.reset();
  if (config.kind != "bag" && config.normalization) {
    const ElementConversion expanded(ElementType::float32, config.features,
                                     ConversionOptions{ElementType::float32, config.normalization});
    const std::size_t feature_bytes = static_cast<std::size_t>(config.features) * sizeof(float);
    input_means_ = allocate_device(feature_bytes);
    input_stddevs_ = allocate_device(feature_bytes);
    // On the compute stream, which the kernels that read them run on (a copy on the legacy stream is
    // not ordered with a non-blocking stream's kernels). From pageable memory the call returns once
    // the bytes are staged, so `expanded` may go.
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(input_means_.get(), expanded.feature_means().data(), feature_bytes,
                                       cudaMemcpyHostToDevice, compute_stream_.get()),
                       "copying the input means to the device");
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(input_stddevs_.get(), expanded.feature_stddevs().data(), feature_bytes,
                                       cudaMemcpyHostToDevice, compute_stream_.get()),
                       "copying the input standard deviations to the device");
  }
  upload(initial_parameters(config), parameters_.get(), "parameters");
  STRIDER_CUDA_CHECK(cudaMemsetAsync(gradients_.get(), 0, bytes, compute_stream_.get()), "zeroing the gradients");
  STRIDER_CUDA_CHECK(cudaMemsetAsync(velocity_.get(), 0, bytes, compute_stream_.get()), "zeroing the momentum");
  staging_.forget_all();
  for (Slot& slot : slots_) slot.released_recorded = false;
  reduce_span_.pending = false;
  sgd_span_.pending = false;
  STRIDER_CUDA_CHECK(cudaEventRecord(origin_.get(), compute_stream_.get()), "recording the timing origin");
  wait_compute("initializing the model on the device");
  reset_stats();
}

std::vector<float> CudaBackend::download(const void* device, const char* what) const {
  require_initialized(what);
  std::vector<float> values(static_cast<std::size_t>(parameter_count_));
  STRIDER_CUDA_CHECK(cudaMemcpyAsync(values.data(), device, values.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                     compute_stream_.get()),
                     std::string("copying the ") + what + " to the host");
  wait_compute("waiting for the copy to the host");
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
  wait_compute("waiting for the copy to the device");  // `values` is pageable and may go away
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

// Every buffer a step or prediction of `count` rows (`elements` sample elements) uses, sized before
// anything is enqueued. Growth frees memory that queued kernels may still use: wait for them first.
void CudaBackend::reserve_scratch(std::int64_t count, std::int64_t elements) {
  const std::int64_t classes = config_.num_classes;
  const auto floats = [](std::int64_t n) { return static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * 4; };
  std::int64_t width = 0;     // the hidden layer (mlp) or mean embedding (bag)
  std::int64_t partials = 0;  // the parameter gradients' chunk sums, the largest layer's
  if (config_.kind == "softmax") {
    partials = dense_->scratch_floats(count, config_.features, classes);
  } else if (config_.kind == "mlp") {
    width = config_.hidden;
    partials =
        std::max(dense_->scratch_floats(count, width, classes), dense_->scratch_floats(count, config_.features, width));
  } else {
    width = config_.embed_dim;
    partials = dense_->scratch_floats(count, width, classes);
  }
  const bool features = config_.kind != "bag";
  const std::pair<DeviceScratch*, std::size_t> device[] = {
      {&inputs_, floats(features ? count * config_.features : 0)},
      {&hidden_, floats(count * width)},
      {&hidden_gradients_, floats(count * width)},
      {&logits_, floats(count * classes)},
      {&logit_gradients_, floats(count * classes)},
      {&losses_, static_cast<std::size_t>(count) * sizeof(double)},
      {&correct_, floats(count)},
      {&buckets_, static_cast<std::size_t>(features ? 1 : std::max<std::int64_t>(elements, 1)) * 8},
      {&predictions_, floats(count)},
      {&partials_, floats(partials)},
  };
  const std::pair<PinnedScratch*, std::size_t> host[] = {
      {&host_losses_, static_cast<std::size_t>(count) * sizeof(double)},
      {&host_correct_, floats(count)},
      {&host_predictions_, floats(count)},
  };
  bool grow = false;
  for (const auto& [scratch, bytes] : device) grow = grow || scratch->needs_growth(bytes);
  for (const auto& [scratch, bytes] : host) grow = grow || scratch->needs_growth(bytes);
  if (!grow) return;
  wait_compute("finishing queued work before growing the scratch buffers");
  for (const auto& [scratch, bytes] : device)
    if (scratch->needs_growth(bytes)) scratch->grow(bytes);
  for (const auto& [scratch, bytes] : host)
    if (scratch->needs_growth(bytes)) scratch->grow(bytes);
}

// Once per backend: a batch in pageable memory cannot be copied asynchronously (the copy may wait
// until it ends), so staging cannot overlap the step. Says which of the batch's arrays are pageable.
void CudaBackend::warn_if_pageable(const BatchInput& input, const BatchBytes& bytes) {
  if (checked_pinned_) return;
  checked_pinned_ = true;
  std::string pageable;
  const std::pair<const void*, const char*> arrays[] = {{bytes.samples > 0 ? input.samples : nullptr, "samples"},
                                                        {bytes.labels > 0 ? input.labels : nullptr, "labels"},
                                                        {bytes.offsets > 0 ? input.offsets : nullptr, "offsets"}};
  for (const auto& [pointer, name] : arrays) {
    if (pointer == nullptr) continue;
    cudaPointerAttributes attributes{};
    STRIDER_CUDA_CHECK(cudaPointerGetAttributes(&attributes, pointer), "asking whether a batch is pinned");
    if (attributes.type != cudaMemoryTypeHost) pageable += std::string(pageable.empty() ? "" : ", ") + name;
  }
  if (!pageable.empty()) {
    log_warn("cuda backend: the batches' ", pageable,
             " are in pageable host memory, so their copies cannot overlap the kernels; allocate batches with "
             "the backend's host_allocator() (the prefetcher's ring does when given it)");
  }
}

void CudaBackend::copy_to_slot(int slot_index, const BatchInput& input, const BatchBytes& bytes, bool staged) {
  Slot& slot = slots_[slot_index];
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
  warn_if_pageable(input, bytes);

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
  slot.type = input.type;
  slot.copied_bytes = bytes.samples + bytes.labels + bytes.offsets;
  slot.serial = staging_.filled(slot_index, StagingKey(input), staged);
}

void CudaBackend::stage(const BatchInput& next) {
  require_initialized("stage");
  if (next.count <= 0 || staging_.find_staged(StagingKey(next)) >= 0) return;
  try {
    const BatchBytes bytes = check_batch(next, false);
    bool dropped = false;
    const int slot = staging_.choose_for_copy(&dropped);
    if (dropped) log_debug("cuda backend: both device slots held staged batches; dropping the older one");
    copy_to_slot(slot, next, bytes, true);
  } catch (...) {
    abandon_batches();
    throw;
  }
}

void CudaBackend::unstage(const BatchInput& batch) noexcept {
  const int slot = staging_.forget(StagingKey(batch));
  if (slot < 0) return;
  // Its copy may still read the host memory the caller is about to reuse.
  if (cudaSetDevice(device_) == cudaSuccess)
    log_release_failure("cudaEventSynchronize", cudaEventSynchronize(slots_[slot].copy_done.get()));
}

// After a failed step, prediction or copy: no staged batch can be trusted (its host memory may be
// reused by the caller's unwinding), and no copy may still read host memory. Never throws.
void CudaBackend::abandon_batches() noexcept {
  staging_.forget_all();
  if (cudaSetDevice(device_) == cudaSuccess && copy_stream_)
    log_release_failure("cudaStreamSynchronize", cudaStreamSynchronize(copy_stream_.get()));
}

// The slot that holds `input`'s batch: its staged copy, or a new copy (not staged).
int CudaBackend::acquire(const BatchInput& input, const BatchBytes& bytes) {
  const int staged = staging_.find_staged(StagingKey(input));
  if (staged >= 0) {
    ++stats_.staged_hits;
    return staged;
  }
  bool dropped = false;
  const int slot = staging_.choose_for_copy(&dropped);
  if (dropped) log_debug("cuda backend: both device slots held staged batches; dropping the older one");
  copy_to_slot(slot, input, bytes, false);
  return slot;
}

const float* CudaBackend::forward(const Slot& slot, std::int64_t count, std::int64_t elements) {
  cudaStream_t stream = compute_stream_.get();
  const float* p = parameter_pointer();
  const std::int64_t classes = config_.num_classes;
  float* logits = logits_.get<float>(count * classes);
  if (config_.kind == "bag") {
    const std::int64_t width = config_.embed_dim;
    auto* buckets = buckets_.get<std::int64_t>(elements);
    float* means = hidden_.get<float>(count * width);
    kernels::tokens_to_buckets(stream, slot.samples, slot.type, elements, config_.vocab, buckets);
    kernels::bag_mean(stream, p + layout_[0].offset, width, buckets, slot.offsets, count, means);
    dense_->forward(means, count, width, p + layout_[1].offset, p + layout_[2].offset, classes, false, logits);
    return logits;
  }
  float* x = inputs_.get<float>(count * config_.features);
  if (config_.normalization) {
    if (!input_conversion_ || input_conversion_->input_type() != slot.type)
      input_conversion_.emplace(slot.type, config_.features,
                                ConversionOptions{ElementType::float32, config_.normalization});
    detail::launch_element_conversion(stream, *input_conversion_, slot.samples, count,
                                      static_cast<const float*>(input_means_.get()),
                                      static_cast<const float*>(input_stddevs_.get()), reinterpret_cast<std::byte*>(x));
  } else {
    kernels::convert_to_float(stream, slot.samples, slot.type, count * config_.features, x);
  }
  if (config_.kind == "softmax") {
    dense_->forward(x, count, config_.features, p + layout_[0].offset, p + layout_[1].offset, classes, false, logits);
  } else {  // mlp
    float* hidden = hidden_.get<float>(count * config_.hidden);
    dense_->forward(x, count, config_.features, p + layout_[0].offset, p + layout_[1].offset, config_.hidden, true,
                    hidden);
    dense_->forward(hidden, count, config_.hidden, p + layout_[2].offset, p + layout_[3].offset, classes, false,
                    logits);
  }
  return logits;
}

void CudaBackend::backward(const Slot& slot, std::int64_t count, std::int64_t elements, const float* logits) {
  cudaStream_t stream = compute_stream_.get();
  const float* p = parameter_pointer();
  float* g = gradient_pointer();
  const int classes = config_.num_classes;
  float* logit_gradients = logit_gradients_.get<float>(count * classes);
  float* partials = partials_.get<float>(0);
  kernels::cross_entropy(stream, logits, count, classes, slot.labels, losses_.get<double>(count),
                         correct_.get<std::int32_t>(count), logit_gradients);
  if (config_.kind == "softmax") {
    dense_->parameter_gradients(inputs_.get<float>(count * config_.features), count, config_.features, logit_gradients,
                                classes, g + layout_[0].offset, g + layout_[1].offset, partials);
  } else if (config_.kind == "mlp") {
    float* hidden = hidden_.get<float>(count * config_.hidden);
    float* hidden_gradients = hidden_gradients_.get<float>(count * config_.hidden);
    dense_->parameter_gradients(hidden, count, config_.hidden, logit_gradients, classes, g + layout_[2].offset,
                                g + layout_[3].offset, partials);
    dense_->input_gradients(p + layout_[2].offset, count, config_.hidden, logit_gradients, classes, hidden,
                            hidden_gradients);
    dense_->parameter_gradients(inputs_.get<float>(count * config_.features), count, config_.features, hidden_gradients,
                                config_.hidden, g + layout_[0].offset, g + layout_[1].offset, partials);
  } else {  // bag
    const std::int64_t width = config_.embed_dim;
    float* means = hidden_.get<float>(count * width);
    float* mean_gradients = hidden_gradients_.get<float>(count * width);
    dense_->parameter_gradients(means, count, width, logit_gradients, classes, g + layout_[1].offset,
                                g + layout_[2].offset, partials);
    dense_->input_gradients(p + layout_[1].offset, count, width, logit_gradients, classes, nullptr, mean_gradients);
    kernels::bag_embedding_gradients(stream, mean_gradients, width, buckets_.get<std::int64_t>(elements), slot.offsets,
                                     count, g + layout_[0].offset);
  }
}

// The start of a step or prediction on `input`: its scratch reserved, its batch in a slot (staged, or
// copied now), the compute stream ordered after that copy, the start recorded. Returns the slot.
int CudaBackend::begin_step(const BatchInput& input, const BatchBytes& bytes) {
  reserve_scratch(input.count, bytes.elements);
  const int slot_index = acquire(input, bytes);
  cudaStream_t stream = compute_stream_.get();
  STRIDER_CUDA_CHECK(cudaStreamWaitEvent(stream, slots_[slot_index].copy_done.get(), 0),
                     "ordering a step after its batch's copy");
  STRIDER_CUDA_CHECK(cudaEventRecord(step_start_.get(), stream), "recording a step's start");
  return slot_index;
}

void CudaBackend::finish_step(int slot_index) {
  Slot& slot = slots_[slot_index];
  cudaStream_t stream = compute_stream_.get();
  STRIDER_CUDA_CHECK(cudaEventRecord(step_end_.get(), stream), "recording a step's end");
  STRIDER_CUDA_CHECK(cudaEventRecord(slot.released.get(), stream), "releasing a batch slot");
  slot.released_recorded = true;
  staging_.consumed(slot_index);
}

StepResult CudaBackend::forward_backward(const BatchInput& input) {
  require_initialized("forward_backward");
  const BatchBytes bytes = check_batch(input, true);  // before anything changes
  StepResult result;
  if (input.count == 0) return result;
  const std::int64_t count = input.count;
  try {
    const int slot_index = begin_step(input, bytes);
    const Slot& slot = slots_[slot_index];
    cudaStream_t stream = compute_stream_.get();
    const float* logits = forward(slot, count, bytes.elements);
    backward(slot, count, bytes.elements, logits);
    finish_step(slot_index);

    auto* host_losses = host_losses_.get<double>(count);
    auto* host_correct = host_correct_.get<std::int32_t>(count);
    STRIDER_CUDA_CHECK(
        cudaMemcpyAsync(host_losses, losses_.get<double>(count), static_cast<std::size_t>(count) * sizeof(double),
                        cudaMemcpyDeviceToHost, stream),
        "copying the losses to the host");
    STRIDER_CUDA_CHECK(
        cudaMemcpyAsync(host_correct, correct_.get<std::int32_t>(count),
                        static_cast<std::size_t>(count) * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream),
        "copying the correct flags to the host");
    wait_compute("running a training step on the device");

    // Sums in row order, like the CPU backend; the per-class counts from the host's labels.
    const auto classes = static_cast<std::size_t>(config_.num_classes);
    result.samples_per_class.assign(classes, 0);
    result.correct_per_class.assign(classes, 0);
    for (std::int64_t i = 0; i < count; ++i) {
      result.loss_sum += host_losses[i];
      result.correct += host_correct[i];
      const auto label = static_cast<std::size_t>(input.labels[i]);
      ++result.samples_per_class[label];
      result.correct_per_class[label] += host_correct[i];
    }
    result.count = count;

    float copy_ms = 0.0f, step_ms = 0.0f, copy_start_ms = 0.0f, step_start_ms = 0.0f;
    STRIDER_CUDA_CHECK(cudaEventElapsedTime(&copy_start_ms, origin_.get(), slot.copy_start.get()), "timing a copy");
    STRIDER_CUDA_CHECK(cudaEventElapsedTime(&copy_ms, slot.copy_start.get(), slot.copy_done.get()), "timing a copy");
    STRIDER_CUDA_CHECK(cudaEventElapsedTime(&step_start_ms, origin_.get(), step_start_.get()), "timing a step");
    STRIDER_CUDA_CHECK(cudaEventElapsedTime(&step_ms, step_start_.get(), step_end_.get()), "timing a step");
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
  } catch (...) {
    abandon_batches();
    throw;
  }
  return result;
}

void CudaBackend::predict(const BatchInput& input, std::int32_t* predictions) {
  require_initialized("predict");
  const BatchBytes bytes = check_batch(input, false);
  if (input.count == 0) return;
  const std::int64_t count = input.count;
  try {
    const int slot_index = begin_step(input, bytes);
    const Slot& slot = slots_[slot_index];
    cudaStream_t stream = compute_stream_.get();
    const float* logits = forward(slot, count, bytes.elements);
    auto* device_predictions = predictions_.get<std::int32_t>(count);
    kernels::argmax_rows(stream, logits, count, config_.num_classes, device_predictions);
    finish_step(slot_index);
    auto* host_predictions = host_predictions_.get<std::int32_t>(count);
    STRIDER_CUDA_CHECK(
        cudaMemcpyAsync(host_predictions, device_predictions, static_cast<std::size_t>(count) * sizeof(std::int32_t),
                        cudaMemcpyDeviceToHost, stream),
        "copying the predictions to the host");
    wait_compute("predicting on the device");
    std::memcpy(predictions, host_predictions, static_cast<std::size_t>(count) * sizeof(std::int32_t));
    float step_ms = 0.0f;
    STRIDER_CUDA_CHECK(cudaEventElapsedTime(&step_ms, step_start_.get(), step_end_.get()), "timing a prediction");
    stats_.kernel_ms += step_ms;
  } catch (...) {
    abandon_batches();
    throw;
  }
}

void CudaBackend::scale_gradients(std::int64_t count) {
  STRIDER_REQUIRE(count >= 0, "scale_gradients: negative sample count " + std::to_string(count));
  require_initialized("scale_gradients");
  if (count == 0) return;
  kernels::scale(compute_stream_.get(), gradient_pointer(), parameter_count_, 1.0f / static_cast<float>(count));
}

void CudaBackend::apply_sgd(float learning_rate, float momentum) {
  require_initialized("apply_sgd");
  begin_span(sgd_span_, "recording an update's start");
  kernels::sgd_momentum(compute_stream_.get(), static_cast<float*>(parameters_.get()), gradient_pointer(),
                        static_cast<float*>(velocity_.get()), parameter_count_, learning_rate, momentum);
  end_span(sgd_span_, "recording an update's end");
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
// aborts it instead. Never throws. Peers are not told: every rank closes on its own.
void CudaBackend::close_nccl(double timeout_s) noexcept {
  if (!nccl_) return;
  try {
    STRIDER_NCCL_CHECK(ncclCommFinalize(nccl_.get()), "finalizing the NCCL communicator");
    NcclWaitHooks hooks = nccl_hooks([this] { return poll_async_error("finalizing the NCCL communicator"); });
    hooks.peer_failure = nullptr;
    hooks.tell_peers = nullptr;
    wait_for_nccl_operation(hooks, timeout_s, "finalizing the NCCL communicator");
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

// One poll of the compute stream with NCCL in use: done when the stream is idle, failed when NCCL
// reports an asynchronous error, running otherwise. A CUDA error throws.
NcclPoll CudaBackend::poll_compute_stream(const char* what) const {
  const cudaError_t state = cudaStreamQuery(compute_stream_.get());
  if (state == cudaSuccess) return NcclPoll{NcclPoll::State::done, 0, ""};
  if (state != cudaErrorNotReady) STRIDER_CUDA_CHECK(state, what);
  NcclPoll poll = const_cast<CudaBackend*>(this)->poll_async_error(what);
  if (poll.state == NcclPoll::State::done) poll.state = NcclPoll::State::running;  // NCCL is fine; the stream runs
  return poll;
}

// The steady clock; between polls a yield at first (a step's wait is often short), then 50 us
// sleeps; abort_nccl; and the peers' failure notices both ways.
NcclWaitHooks CudaBackend::nccl_hooks(std::function<NcclPoll()> poll) const {
  auto* self = const_cast<CudaBackend*>(this);
  NcclWaitHooks hooks;
  hooks.poll = std::move(poll);
  hooks.now_s = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  hooks.pause = [polls = 0]() mutable {
    if (++polls <= 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  };
  hooks.abort = [self] { self->abort_nccl(); };
  if (notices_) {
    FailureNotices* notices = notices_.get();
    hooks.peer_failure = [notices]() -> std::string {
      const auto notice = notices->poll();
      return notice ? "rank " + std::to_string(notice->rank) + " failed: " + notice->reason : "";
    };
    hooks.tell_peers = [notices](const std::string& reason) { notices->notify(reason); };
  }
  return hooks;
}

// A failure of this rank reaches the peers once; not when it is a peer's failure that arrived here.
void CudaBackend::tell_peers_unless_told(const std::string& reason) noexcept {
  if (!notices_) return;
  try {
    if (!notices_->poll()) notices_->notify(reason);
  } catch (const std::exception& error) {
    log_warn("cuda backend: could not tell the other ranks: ", error_message(error));
  }
}

// Waits until a non-blocking NCCL call has finished enqueuing (or the communicator is ready); on an
// error, a peer's failure or after the timeout aborts the communicator and throws NcclError.
void CudaBackend::wait_for_nccl(const char* what) {
  wait_for_nccl_operation(nccl_hooks([this, what] { return poll_async_error(what); }), nccl_timeout_s_, what);
}

// Collective over comm: compares devices, then picks how gradients are reduced and builds NCCL.
void CudaBackend::build_reduction(const Communicator& comm) {
  if (nccl_) {
    if (initialized_) wait_compute("finishing the work on the old NCCL communicator");
    close_nccl(nccl_timeout_s_ > 0 ? nccl_timeout_s_ : 600.0);
  }
  notices_.reset();
  reduce_mode_ = ReduceMode::none;
  const std::vector<DeviceIdentity> identities = comm.all_gather(identity_);
  check_device_sharing(identities, allow_shared_device_);  // the same decision on every rank
  if (comm.size() == 1 && !nccl_one_rank_) {
    reduce_mode_ = ReduceMode::local;
  } else if (!ranks_sharing_devices(identities).empty()) {
    reduce_mode_ = ReduceMode::mpi_host;
    if (comm.is_root()) {
      log_info("cuda backend: ", describe_shared_devices(identities, ranks_sharing_devices(identities)),
               " (allowed); NCCL refuses two ranks on one device, so gradients are all-reduced with MPI through "
               "host memory");
    }
  } else {
    notices_ = std::make_unique<FailureNotices>(comm);
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
    } catch (const std::exception& error) {
      // Tell the peers first (a wait that failed here already did), so that none waits for this rank.
      tell_peers_unless_told("creating the NCCL communicator: " + error_message(error));
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
  connected_comm_ = comm.native();
  connected_size_ = comm.size();
  stats_.all_reduce = reduce_mode_name(reduce_mode_);
}

void CudaBackend::all_reduce_gradients(const Communicator& comm, std::int64_t global_count) {
  require_initialized("all_reduce_gradients");
  STRIDER_REQUIRE(global_count >= 0, "all_reduce_gradients: negative sample count " + std::to_string(global_count));
  connect(comm);
  cudaStream_t stream = compute_stream_.get();
  const auto count = static_cast<std::size_t>(parameter_count_);
  if (reduce_mode_ == ReduceMode::mpi_host && host_gradients_.needs_growth(count * sizeof(float))) {
    wait_compute("finishing the previous copy of the gradients");  // an H2D copy may still read the old buffer
    host_gradients_.grow(count * sizeof(float));
  }
  begin_span(reduce_span_, "recording an all-reduce's start");
  if (reduce_mode_ == ReduceMode::nccl) {
    // Only enqueued: the next host wait (the next step's end) polls it, with NCCL's errors.
    try {
      STRIDER_NCCL_CHECK(
          ncclAllReduce(gradient_pointer(), gradient_pointer(), count, ncclFloat, ncclSum, nccl_.get(), stream),
          "all-reducing " + std::to_string(count * sizeof(float)) + " bytes of gradients");
      wait_for_nccl("enqueuing the gradient all-reduce");
    } catch (const std::exception& error) {
      tell_peers_unless_told("the gradient all-reduce: " + error_message(error));
      abort_nccl();  // no rank may hang on this communicator again
      throw;
    }
  } else if (reduce_mode_ == ReduceMode::mpi_host) {
    auto* host = host_gradients_.get<float>(parameter_count_);
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(host, gradient_pointer(), count * sizeof(float), cudaMemcpyDeviceToHost, stream),
                       "copying the gradients to the host for MPI");
    wait_compute("copying the gradients to the host for MPI");
    comm.all_reduce(host, parameter_count_, ReduceOp::sum);
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(gradient_pointer(), host, count * sizeof(float), cudaMemcpyHostToDevice, stream),
                       "copying the all-reduced gradients to the device");
  }
  if (global_count > 0) scale_gradients(global_count);
  end_span(reduce_span_, "recording an all-reduce's end");
}

CudaBackendStats CudaBackend::stats() const {
  if (initialized_) {
    activate();
    wait_compute("collecting the CUDA backend's timings");
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
  reduce_span_.pending = false;
  sgd_span_.pending = false;
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
                                               flags.nccl_timeout_s, flags.nccl_one_rank, flags.dense);
}

CudaBackendStats cuda_backend_stats(const Backend& backend) {
  return detail::as_cuda(backend).stats();
}

void reset_cuda_backend_stats(Backend& backend) {
  const_cast<detail::CudaBackend&>(detail::as_cuda(backend)).reset_stats();
}

}  // namespace strider
