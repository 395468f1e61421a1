#pragma once
/// \file
/// The prefetcher: a persistent ring of K batch buffers, filled ahead of use by one background I/O
/// thread that owns the reader, delivered in plan order with backpressure. (Or, without the I/O
/// thread, read on the caller's thread inside next(): the same batches, for measuring the reader.)
///
///   Prefetcher prefetcher(std::move(reader), options);
///   for (epoch ...) {
///     sampler.set_epoch(epoch);             // only while no epoch is running
///     prefetcher.start_epoch(sampler);
///     while (auto batch = prefetcher.next()) { train(*batch); }   // batch released on scope exit
///   }
///
/// Threads and buffers persist across epochs. An error in the I/O thread reaches the consumer as
/// the original exception (type and context) on its next call to next(). stop() and the destructor
/// end the I/O at any point without hanging. Results are identical for any depth.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "strider/core/shared_view.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/pipeline/host_allocator.hpp"
#include "strider/pipeline/prefetch_observer.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

/// The most batch buffers a ring holds (`--prefetch` 1..64).
inline constexpr int kMaxPrefetchDepth = 64;

/// Options of the prefetcher.
struct PrefetcherOptions {
  int depth = 4;  ///< K, batch buffers in the ring (1..kMaxPrefetchDepth); see prefetch_depth
  std::shared_ptr<HostAllocator> allocator;  ///< null: page-aligned host memory
  /// true: a background I/O thread reads ahead. false: no thread; next() reads the batch on the
  /// caller's thread (the time it takes counts as stall), and the ring only holds batches the
  /// caller keeps.
  bool io_thread = true;
  /// With io_thread: measure both layouts (reading ahead on the I/O thread, reading on the
  /// consumer's thread) over blocks of steps in the first epoch(s), the consumer's own step
  /// included, and keep the one that takes clearly less time per step (see layout()). Where a
  /// rank has no core to spare for its I/O thread, handing batches between threads can cost more
  /// than it overlaps. The batches are the same in either layout. Not with the hdf5 engine: HDF5
  /// here is not thread-safe, so the thread that read first makes every read (the I/O thread stays).
  bool measure_layout = false;
  /// With measure_layout: whether this rank has a core for its I/O thread beside the consumer's.
  /// Decides which layout a tie goes to: with one the I/O thread, without one the consumer's thread
  /// (the Loader counts the cores; see LayoutMeasurement::spare_core).
  bool spare_core = true;
  /// One read() call per sample instead of one per batch (the same bytes; shows what batching
  /// saves, e.g. a chunk decompressed once per batch instead of once per row).
  bool read_rows_one_by_one = false;
  /// Steps whose rows are read together, in one pass in file order (0: every batch on its own).
  /// Two such windows are in memory at once: one delivered, the next read meanwhile. Meant for
  /// chunked data read through HDF5, where a row costs its whole chunk (LoaderOptions::lookahead).
  std::int64_t lookahead_steps = 0;
  /// Receives the read, deliver and wait events (strider/pipeline/prefetch_observer.hpp); null:
  /// none, the usual case.
  std::shared_ptr<PrefetchObserver> observer = nullptr;
};

/// The ring depth for a `--prefetch` value: `requested` when it is positive; for 0 (auto) enough
/// batches to hold 16 MiB, at least 4 and at most kMaxPrefetchDepth. A batch of small rows is read in tens of
/// microseconds, so a ring of 4 holds well under a millisecond of work, less than the scheduler's time slice: when
/// threads outnumber cores (ranks x (consumer + I/O thread)), a runnable I/O thread can wait that long and the consumer
/// stalls; a deeper ring rides that out. `batch_size` rows per batch (0: the whole dataset); sequences use `max_tokens`
/// tokens per batch when set, else batch_size rows of average length.
///
/// `batches_held` is how many batches the consumer holds at once: 2 for a trainer that keeps the next batch staged
/// on a device while it computes on the current one (Backend::overlaps_copies), 1 otherwise. When it is more than
/// 1, the depth is at least batches_held + 1, an explicit request included, so that the I/O thread always has a
/// buffer to read the following batch into; with fewer it could only read once the consumer released one, and every
/// step would wait for a whole read.
int prefetch_depth(int requested, const DatasetInfo& info, std::int64_t batch_size, std::int64_t max_tokens,
                   int batches_held = 1) noexcept;

/// The bytes of samples in one batch, as prefetch_depth estimates them: `batch_size` rows (0: the
/// whole dataset) of fixed-size samples; for sequences `max_tokens` tokens when set, else batch_size
/// rows of the mean length.
double expected_batch_bytes(const DatasetInfo& info, std::int64_t batch_size, std::int64_t max_tokens) noexcept;

/// Counters of one rank's prefetcher, cumulative since construction (or reset_stats()): what a
/// trainer logs. Where the time inside a read or a handoff goes is for a PrefetchObserver
/// (strider/pipeline/prefetch_observer.hpp) to add up.
struct PrefetchStats {
  double stall_seconds = 0.0;                 ///< time the consumer waited inside next() for a batch
  double wall_seconds = 0.0;                  ///< time since the first start_epoch (or reset_stats)
  double io_seconds = 0.0;                    ///< time the I/O thread spent reading
  double time_to_first_batch_seconds = -1.0;  ///< from the first start_epoch to the first batch delivered
  std::int64_t bytes_read = 0;                ///< bytes the reader read from the file
  std::int64_t useful_bytes = 0;              ///< bytes of samples delivered
  std::int64_t batches = 0;                   ///< batches delivered to the consumer
  std::int64_t samples = 0;                   ///< samples delivered to the consumer
  std::int64_t read_calls = 0;                ///< the reader's pread / H5Dread / memcpy-run calls
  std::int64_t bytes_local = 0;               ///< in-memory store: bytes copied from this node's memory
  std::int64_t bytes_remote = 0;              ///< in-memory store: bytes received from other nodes
  std::int64_t remote_requests = 0;           ///< in-memory store: requests to other nodes

  /// stall_seconds / wall_seconds: the one definition of stall fraction used everywhere.
  double stall_fraction() const noexcept { return wall_seconds > 0 ? stall_seconds / wall_seconds : 0.0; }
};

/// What PrefetcherOptions::measure_layout found: each layout's wall time per step (the consumer's
/// step included; the median of its timed blocks), and the layout kept.
struct LayoutMeasurement {
  bool decided = false;                  ///< measuring ended (false: still measuring, or not measured)
  bool measuring = false;                ///< still measuring (see PrefetcherOptions::measure_layout)
  bool caller_thread = false;            ///< the layout kept: batches read on the consumer's thread
  double io_thread_us_per_step = 0;      ///< reading ahead on the I/O thread
  double caller_thread_us_per_step = 0;  ///< reading on the consumer's thread
  std::int64_t steps_measured = 0;       ///< per layout
  /// The rule it was decided by (PrefetcherOptions::spare_core): with a core to spare for the I/O
  /// thread the consumer's thread is kept only when more than 5% faster, without one unless the
  /// I/O thread is more than 5% faster.
  bool spare_core = true;
};

class Prefetcher;

/// A delivered batch: views into one ring buffer, valid until the Batch is released (destroyed or
/// release()d), after which the buffer returns to the ring. Move-only.
class Batch {
 public:
  Batch() = default;
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch();

  /// Returns the buffer to the ring now (the views become invalid).
  void release() noexcept;

  std::int64_t epoch() const noexcept { return epoch_; }
  /// The step within the epoch (as the sampler counts it).
  std::int64_t step() const noexcept { return step_; }
  /// Number of samples.
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(indices_->size()); }
  /// Global sample indices, in batch order.
  const std::vector<std::int64_t>& indices() const noexcept { return *indices_; }
  /// Samples (or tokens) back to back in batch order.
  const std::byte* samples() const noexcept { return samples_; }
  std::int64_t samples_bytes() const noexcept { return samples_bytes_; }
  /// size() labels, or nullptr when the dataset has none.
  const std::int32_t* labels() const noexcept { return labels_; }
  /// Sequences: size()+1 token offsets into samples(); nullptr for fixed-size samples.
  const std::int64_t* offsets() const noexcept { return offsets_; }

 private:
  friend class Prefetcher;
  Prefetcher* owner_ = nullptr;
  int slot_ = -1;
  std::int64_t epoch_ = 0;
  std::int64_t step_ = 0;
  const std::vector<std::int64_t>* indices_ = nullptr;
  const std::byte* samples_ = nullptr;
  std::int64_t samples_bytes_ = 0;
  const std::int32_t* labels_ = nullptr;
  const std::int64_t* offsets_ = nullptr;
};

/// Fills a ring of batch buffers ahead of use. next(), start_epoch(), stop() and stats() are called
/// from one consumer thread; Batch objects may be released from any thread.
class Prefetcher {
 public:
  /// Takes the reader (from now on only the I/O thread calls it) and starts the I/O thread.
  Prefetcher(std::unique_ptr<BatchReader> reader, PrefetcherOptions options);
  /// Stops the I/O thread (waiting for a read in progress to finish) and frees the ring. Never
  /// throws. Batches still held become invalid: release them first.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  /// Starts delivering steps [first_step, end_step) of the sampler's current epoch (end_step < 0:
  /// to the end). The sampler must outlive the epoch and must not change (no set_epoch) until next()
  /// returned nullopt or stop() returned. Stops a running epoch first. Buffers grow (once) if this
  /// epoch's largest batch needs more room; that needs every batch released.
  void start_epoch(const Sampler& sampler, std::int64_t first_step = 0, std::int64_t end_step = -1);

  /// The next batch in plan order, blocking until it is read; nullopt at the end of the epoch.
  /// Rethrows an error of the I/O thread (the original exception). Throws UsageError when the
  /// consumer holds every buffer of the ring (it would wait forever). `between_waits`, where given,
  /// is called about every kBetweenWaits while the I/O thread's batch is awaited, with no lock held
  /// (Python checks for Ctrl-C there); what it throws leaves next() with no batch taken.
  std::optional<Batch> next(const std::function<void()>& between_waits = nullptr);
  static constexpr std::chrono::milliseconds kBetweenWaits{100};

  /// Ends the running epoch now (mid-epoch is fine): the I/O thread finishes the read in progress
  /// and goes idle; undelivered batches are dropped. Afterwards the sampler may change.
  void stop() noexcept;

  PrefetchStats stats() const;
  void reset_stats();
  const DatasetInfo& dataset() const noexcept { return info_; }
  /// The reader's labels / lengths (read once at open; safe to read from the consumer thread).
  SharedView<std::int32_t> labels() const;
  SharedView<std::int64_t> lengths() const;
  /// The reader's BatchReader::read_labels, on the consumer thread: only while no epoch runs
  /// (before the first start_epoch, or after next() returned nullopt or stop()); throws UsageError
  /// otherwise.
  void read_labels(std::int64_t first, std::int64_t count, std::int32_t* out);
  /// The reader's engine: "hdf5", "direct" or "mmap".
  std::string engine() const;
  /// Ends the I/O thread (waiting for a read in progress) and hands the reader back. Afterwards the
  /// prefetcher can only be destroyed. For a caller that must not destroy the reader now: an
  /// hdf5-engine reader's close is collective.
  std::unique_ptr<BatchReader> release_reader() noexcept;
  int depth() const noexcept { return depth_; }
  /// The thread layout measurement (PrefetcherOptions::measure_layout); consumer thread.
  LayoutMeasurement layout() const;
  /// Ends any measurement and reads on the consumer's thread from now on when `caller_thread`,
  /// else ahead on the I/O thread (with one); layout().caller_thread says so from then on. For the
  /// layout the ranks agreed on (the Loader). Consumer thread; the batches are the same either way.
  void use_layout(bool caller_thread);
  /// Bytes of each ring buffer's samples area.
  std::size_t buffer_bytes() const noexcept;

 private:
  friend class Batch;
  struct State;
  struct ReadFigures;
  void release_slot(int slot) noexcept;
  void io_loop() noexcept;
  /// next() without an I/O thread: reads the next step on the caller's thread (`lock` held on entry).
  std::optional<Batch> next_on_caller_thread(std::unique_lock<std::mutex>& lock,
                                             std::chrono::steady_clock::time_point entered);
  /// Reads steps first_step .. first_step + slots.size() - 1 of the sampler's epoch into `slots`
  /// (called without the mutex; several steps with one BatchReader::read_batches call); returns what
  /// it cost and the reader's failure, if any (which then spoils every one of them).
  ReadFigures fill_slots(const std::vector<int>& slots, const Sampler& sampler, std::int64_t epoch,
                         std::int64_t first_step, std::size_t capacity) noexcept;
  /// How many steps the next read takes (mutex held; a step and a buffer must be there): the
  /// reader's batches_per_read, bounded by the free buffers, the epoch's steps left, a quarter of
  /// the ring and an injected failure's step (tests), which is then read on its own.
  std::size_t steps_per_read() const noexcept;
  /// Takes the next read's steps and buffers (mutex held; a step and a buffer must be there):
  /// steps_per_read() free buffers into `slots`; returns the first of the steps, now counted read.
  std::int64_t take_next_read(std::vector<int>& slots);
  /// Counts a read into the stats (mutex held).
  void count_read(const ReadFigures& figures) noexcept;
  /// With an observer: sends it the I/O thread's CPU time and context switches since the last time
  /// (I/O thread, mutex held).
  void send_io_usage() noexcept;
  /// The layout measurement's step at a next() call (consumer, mutex held): times blocks of steps
  /// and switches the layout between them.
  void measure_layout_step();
  /// The layout measurement at an epoch's start (mutex held): the epoch starts with the I/O thread.
  void start_layout_epoch();
  /// The consumer's Batch view of a filled slot; counts it in the stats (mutex held).
  Batch deliver(int slot);

  DatasetInfo info_;
  int depth_;
  std::unique_ptr<State> state_;
};

}  // namespace strider
