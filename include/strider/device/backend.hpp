#pragma once
/// \file
/// The training backend: where the model's parameters, gradients and optimizer state live (host or
/// device memory), how a batch gets there (copy), one step (forward/backward, SGD) and the gradient
/// all-reduce. CpuBackend (cpu_backend.hpp) is the reference; the CUDA backend (code in
/// src/device/cuda/) implements the same interface. No CUDA header here. A trainer asks the
/// interface, never the backend's name: connect(comm) once, host_allocator() for the prefetcher's
/// ring, overlaps_copies() to decide whether to stage the next batch during a step.
///
/// Construction, then one training step on every rank:
///
///   std::unique_ptr<Backend> backend = make_backend(choice, comm, &why);
///   backend->initialize(resolved_model_config);      // same parameters on every rank
///   comm.collective_try([&] { backend->connect(comm); });
///   backend->zero_gradients();                       // (apply_sgd also leaves them zero)
///   StepResult local = backend->forward_backward(input);
///   std::int64_t global = comm.all_reduce(local.count, ReduceOp::sum);
///   backend->all_reduce_gradients(comm, global);     // sum over ranks, then / global
///   backend->apply_sgd(learning_rate, momentum);
///
/// Gradients are those of the mean cross-entropy over the global batch, so ranks with different batch
/// sizes (token-budget batches, a short last batch, an empty batch) weigh by their sample counts.
/// A backend object is used by one thread at a time.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/device/batch_input.hpp"
#include "strider/device/model.hpp"
#include "strider/pipeline/host_allocator.hpp"

namespace strider {

/// A training backend. Parameters, gradients and the momentum buffer are flat float vectors in the
/// layout of parameter_layout(config()).
class Backend {
 public:
  virtual ~Backend() = default;

  /// "cpu" or "cuda".
  virtual std::string name() const = 0;

  /// The GPU ordinal this rank drives (relative to its visible devices), -1 for the CPU.
  virtual int device() const { return -1; }

  /// Builds the model of a resolved config (resolve_model_config) with initial_parameters(config),
  /// zero gradients and a zero momentum buffer. Not collective: every rank computes the same
  /// parameters from the same config. Throws UsageError for an invalid config.
  virtual void initialize(const ModelConfig& config) = 0;
  /// The config given to initialize().
  virtual const ModelConfig& config() const = 0;
  /// Length of the flat parameter vector.
  virtual std::int64_t parameter_count() const = 0;

  /// Collective over comm: every rank must call (with the comm it will pass to
  /// all_reduce_gradients). Does now what the first all_reduce_gradients would otherwise do, so that
  /// its failures surface where the caller can agree on them (inside collective_try): the CUDA
  /// backend compares the ranks' devices (UsageError on every rank for a GPU shared by two ranks,
  /// unless allowed) and builds its NCCL communicator. The CPU backend needs nothing: it returns at
  /// once. Calling it again with the same comm does nothing.
  virtual void connect(const Communicator& comm) = 0;

  /// The host memory the prefetcher's ring should hold this backend's batches in: pinned
  /// (cudaHostAlloc) where the backend copies batches to a GPU, so copies run asynchronously;
  /// page-aligned otherwise. A new allocator each call; allocators are thread-safe. Not collective.
  virtual std::shared_ptr<HostAllocator> host_allocator() const = 0;

  /// True when stage(next) starts the next batch's copy to the device while the current step runs
  /// (the CUDA backend), so that a trainer gains from taking batch k+1 from the prefetcher before it
  /// computes on batch k; false when stage() does nothing (the CPU backend). Not collective.
  virtual bool overlaps_copies() const = 0;

  /// A host copy of the parameters.
  virtual std::vector<float> parameters() const = 0;
  /// Replaces the parameters (e.g. from a checkpoint). Throws UsageError on a length mismatch.
  virtual void set_parameters(const std::vector<float>& parameters) = 0;
  /// A host copy of the gradient buffer (tests, checks across backends).
  virtual std::vector<float> gradients() const = 0;
  /// Sets the gradient buffer to zero.
  virtual void zero_gradients() = 0;

  /// Optional: starts copying `next` to the device while the current step runs (the CUDA backend's
  /// copy stream); the forward_backward or predict call that gets the same `next` uses the staged
  /// copy. A staged batch is known by its pointers alone, so `next`'s memory must hold that batch
  /// until a forward_backward or predict call with it has returned, or until unstage(next): call
  /// unstage before its memory is reused or freed otherwise (StepBatches does). After a failed call
  /// the backend forgets every staged batch. The CPU backend ignores it.
  virtual void stage(const BatchInput& next) { (void)next; }

  /// Forgets the staged copy of `batch` (a batch given to stage() that no step consumed) and waits
  /// until that copy has stopped reading host memory, so that the memory can be reused. Does nothing
  /// when `batch` is not staged (consumed, or never staged). Never throws.
  virtual void unstage(const BatchInput& batch) noexcept { (void)batch; }

  /// Forward and backward pass over the batch: adds the gradients of the summed cross-entropy of its
  /// samples to the gradient buffer (they accumulate until zero_gradients or apply_sgd; divide by the
  /// count with all_reduce_gradients or scale_gradients) and returns the sums. count 0 adds nothing.
  /// Needs labels. Throws DataError for a label outside 0..num_classes-1. Not collective.
  virtual StepResult forward_backward(const BatchInput& input) = 0;

  /// Collective over comm: every rank must call (also a rank whose batch was empty). Sums the
  /// gradient buffers over the ranks (one all-reduce of the flat vector), then divides by
  /// global_count (the sum of the ranks' sample counts; 0 leaves the sum). Afterwards every rank holds
  /// the gradient of the mean loss over the global batch.
  virtual void all_reduce_gradients(const Communicator& comm, std::int64_t global_count) = 0;

  /// Divides the gradient buffer by count (single process, no MPI; count 0 leaves it). Not collective.
  virtual void scale_gradients(std::int64_t count) = 0;

  /// One SGD step with momentum (PyTorch's form): velocity = momentum * velocity + gradient;
  /// parameters -= learning_rate * velocity. Then zeroes the gradients. Not collective: every rank
  /// applies the same all-reduced gradients, so parameters stay identical.
  virtual void apply_sgd(float learning_rate, float momentum) = 0;

  /// The optimizer state (the momentum buffer, parameter_count() floats), for checkpoints.
  virtual std::vector<float> optimizer_state() const = 0;
  /// Restores optimizer_state(). Throws UsageError on a length mismatch.
  virtual void set_optimizer_state(const std::vector<float>& state) = 0;

  /// Writes the argmax class of each of input.count samples to predictions (host memory). Labels are
  /// not needed. Not collective.
  virtual void predict(const BatchInput& input, std::int32_t* predictions) = 0;
};

/// Picks the backend for `--backend choice` (auto | cpu | cuda) and initializes nothing.
/// - cpu: the CPU backend.
/// - auto: the CUDA backend when this build has CUDA and a device works, else the CPU backend; *why
///   (when not null) says in words which backend and why (e.g. the GPU probe's reason).
/// - cuda: throws UsageError when this build has no CUDA or no device works.
/// Any other choice throws UsageError. Not collective (probes this rank's devices only); the app
/// should agree on the result (e.g. collective_try) so that all ranks run the same backend.
std::unique_ptr<Backend> make_backend(const std::string& choice, const Communicator& comm, std::string* why);

}  // namespace strider
