#pragma once
/// \file
/// Device batches: for a trainer with its own GPU code (not strider's models). Each batch from the
/// pinned ring is copied to the GPU on strider's copy stream (converted and normalized there when
/// asked, with strider/device/element_conversion.hpp), into one of a few device slots, while the
/// trainer's previous step runs. The trainer waits on the batch's `ready()` event on its own stream,
/// runs its kernels, records an event after them and hands the slot back with release(batch, event):
/// the next copy into that slot waits for the event on the device, never on the host.
///
///   auto batches = make_device_batches("auto", comm, options, &why);     // before the Loader
///   loader_options.allocator = batches->host_allocator();               // pinned ring
///   Loader loader(comm, loader_options);
///   LoaderEpoch epoch = loader.epoch(e);
///   std::optional<Batch> host = epoch.next();
///   std::optional<DeviceBatch> current;
///   if (host) current = batches->put(batch_input(*host, loader.dataset()), std::move(*host));
///   while (current) {
///     std::optional<DeviceBatch> following;                             // batch k+1's copy starts now
///     if ((host = epoch.next())) following = batches->put(batch_input(*host, loader.dataset()), std::move(*host));
///     cudaStreamWaitEvent(stream, current->ready(), 0);
///     my_step<<<grid, block, 0, stream>>>(current->data<float>(), current->count(), current->labels());
///     cudaEventRecord(step_done, stream);
///     batches->release(*current, step_done);
///     current = following;
///   }
///
/// The CPU twin (make_device_batches("cpu", ...), or "auto" without a GPU) does the same conversion
/// into host memory at once: its batches are host pointers, ready() is null and release() takes a
/// null event. No CUDA header here: DeviceEvent is CUDA's own cudaEvent_t type, declared without
/// the CUDA headers, so a trainer passes its events as they are.
///
/// Threads: one thread uses a DeviceBatches and its batches; its copies run on its own stream.

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "strider/comm/communicator.hpp"
#include "strider/core/element_type.hpp"
#include "strider/core/error.hpp"
#include "strider/device/batch_input.hpp"
#include "strider/device/element_conversion.hpp"
#include "strider/pipeline/host_allocator.hpp"

/// CUDA's event type (cudaEvent_t is `CUevent_st*`), declared here so that no CUDA header is needed.
struct CUevent_st;

namespace strider {

/// A CUDA event (cudaEvent_t) in a header without CUDA; nullptr means "no event".
using DeviceEvent = CUevent_st*;

/// Options of make_device_batches.
struct DeviceBatchOptions {
  /// What the samples become on the device (default: the stored bytes). Fixed-size samples only:
  /// token sequences are always copied as stored.
  ConversionOptions conversion;
  /// Device slots: batches that can be on the device at once, held by the trainer or being copied
  /// (2: the trainer computes on one while the next one is copied). 1..64.
  int slots = 2;
};

/// One batch in a device slot: views, valid until the batch is released. Copyable (a view); release
/// it exactly once.
class DeviceBatch {
 public:
  DeviceBatch() = default;

  /// The samples: count() * features() elements of type() (the conversion's output type), or, for
  /// token sequences, the tokens. Device memory (host memory from the CPU twin); null when empty.
  const void* samples() const noexcept { return samples_; }
  /// samples() as T*. Throws UsageError when sizeof(T) is not the element size of type() (for
  /// float16, use __half or std::uint16_t).
  template <typename T>
  const T* data() const {
    STRIDER_REQUIRE(sizeof(T) == element_bytes(type_), std::string("DeviceBatch::data<T>: the samples are ") +
                                                           element_name(type_) + ", " +
                                                           std::to_string(element_bytes(type_)) + " bytes each");
    return static_cast<const T*>(samples_);
  }
  ElementType type() const noexcept { return type_; }
  /// Samples in the batch.
  std::int64_t count() const noexcept { return count_; }
  /// Elements per fixed-size sample; 0 for token sequences.
  std::int64_t features() const noexcept { return features_; }
  /// Elements in samples(): count() * features(), or the batch's tokens.
  std::int64_t elements() const noexcept { return elements_; }
  /// count() labels on the same device, or null when the batch has none.
  const std::int32_t* labels() const noexcept { return labels_; }
  /// Sequences: count() + 1 token offsets on the same device (row i is tokens [offsets[i] -
  /// offsets[0], offsets[i+1] - offsets[0]), as in BatchInput); null for fixed-size samples.
  const std::int64_t* offsets() const noexcept { return offsets_; }
  /// Completes when the copy (and conversion) has finished: wait on it on your stream
  /// (cudaStreamWaitEvent) before reading the batch. Null from the CPU twin (nothing to wait for).
  DeviceEvent ready() const noexcept { return ready_; }
  /// The slot the batch occupies (0 .. slots-1).
  int slot() const noexcept { return slot_; }

 private:
  friend class DeviceBatches;
  const void* samples_ = nullptr;
  ElementType type_ = ElementType::float32;
  std::int64_t count_ = 0;
  std::int64_t features_ = 0;
  std::int64_t elements_ = 0;
  const std::int32_t* labels_ = nullptr;
  const std::int64_t* offsets_ = nullptr;
  DeviceEvent ready_ = nullptr;
  int slot_ = -1;
  std::uint64_t serial_ = 0;
  const void* source_ = nullptr;  ///< the DeviceBatches that put it
};

namespace detail {
class DeviceBatchEngine;
}  // namespace detail

/// Copies host batches into device slots on a copy stream of its own (see the file comment). Not
/// copyable or movable. Not thread-safe: one thread at a time.
class DeviceBatches {
 public:
  /// Use make_device_batches.
  DeviceBatches(std::unique_ptr<detail::DeviceBatchEngine> engine, DeviceBatchOptions options);
  /// Waits for the copies in flight and for the release events handed back, then frees the slots
  /// and drops the host batches it still holds. Never throws. Release every batch (and let the work
  /// that reads it finish) first, and destroy this object before the Loader whose batches it holds,
  /// or release all of them (a released batch's host batch is dropped by then).
  ~DeviceBatches();
  DeviceBatches(const DeviceBatches&) = delete;
  DeviceBatches& operator=(const DeviceBatches&) = delete;

  /// "cuda" or "cpu" (the CPU twin).
  std::string name() const;
  /// The CUDA device the copies go to (the one a trainer's kernels should use); -1 for the CPU twin.
  int device() const;
  /// The host memory the Loader's ring should use: pinned for "cuda" (copies run asynchronously
  /// only from pinned memory), page-aligned for "cpu". Not collective.
  std::shared_ptr<HostAllocator> host_allocator() const;
  /// The number of device slots, and how many the caller holds now.
  int slots() const noexcept;
  int held() const noexcept;

  /// Checks the conversion options against samples of `features` elements of `type` and puts the
  /// normalization statistics on the device, as the first put() of such a batch would; call it
  /// after the Loader is open (loader.dataset()) to see a bad option before the first step.
  /// Throws UsageError naming the problem. Not collective (every rank with the same options and
  /// dataset decides the same).
  void prepare(ElementType type, std::int64_t features);

  /// Starts copying `host` into a free slot (and converting it) on the copy stream, and returns at
  /// once. `owner` (e.g. the Loader's Batch that `host` views, passed with std::move) keeps the host
  /// memory alive: it is dropped as soon as the copy has finished (seen at any later call) and at
  /// the latest when the batch is released. Throws UsageError when every slot is held, for an
  /// inconsistent batch, or for conversion options that do not fit it (the owner is then dropped).
  template <typename HostOwner>
  DeviceBatch put(const BatchInput& host, HostOwner&& owner) {
    static_assert(!std::is_lvalue_reference_v<HostOwner>, "pass the owner of the host memory with std::move");
    using Owner = std::decay_t<HostOwner>;
    return put_batch(host, std::make_shared<Owner>(std::forward<HostOwner>(owner)));
  }
  /// put() without an owner: the caller keeps `host` valid and unchanged until release() of the
  /// returned batch has returned (release waits for the copy if it is still running).
  DeviceBatch put(const BatchInput& host) { return put_batch(host, nullptr); }

  /// Hands the batch's slot back. `done` is an event the caller recorded on its stream after the
  /// last work that reads the batch (record it before calling): the next copy into the slot waits
  /// for it on the device. nullptr: nothing reads the batch any more. Throws UsageError for a batch
  /// that is not held (released twice, or from another DeviceBatches).
  void release(const DeviceBatch& batch, DeviceEvent done);

  /// Blocks until every copy started so far has finished, and drops the host batches of finished
  /// copies (all of them). Not needed in a loop that releases its batches.
  void synchronize();

 private:
  struct State;
  DeviceBatch put_batch(const BatchInput& host, std::shared_ptr<void> owner);
  void drop_finished_owners();
  std::unique_ptr<State> state_;
};

/// Device batches for `choice` (auto | cpu | cuda), like make_backend: cpu is the CPU twin; auto
/// takes this rank's GPU when this build has CUDA and a device works, else the CPU twin, and says
/// which and why in *why (when not null); cuda throws UsageError without a working GPU. The GPU is
/// choose_device(comm.local_rank(), visible devices), as for the CUDA backend. Checks the options
/// (UsageError: slots outside 1..64, a conversion to anything but float32 or float16, float16
/// output on a GPU without half-precision arithmetic). Not collective.
std::unique_ptr<DeviceBatches> make_device_batches(const std::string& choice, const Communicator& comm,
                                                   DeviceBatchOptions options, std::string* why);

}  // namespace strider
