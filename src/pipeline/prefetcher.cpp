#include "strider/pipeline/prefetcher.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/test_hooks.hpp"
#include "pipeline/lookahead.hpp"
#include "pipeline/pages.hpp"
#include "pipeline/thread_layout.hpp"
#include "pipeline/thread_usage.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"

namespace strider {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

/// `count` values of T in memory from the ring's HostAllocator.
template <typename T>
class HostArray {
 public:
  void allocate(const std::shared_ptr<HostAllocator>& allocator, std::int64_t count) {
    buffer_ = HostBuffer();  // free first: keep the peak at one ring
    buffer_ = HostBuffer(allocator, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T));
  }
  T* data() const noexcept { return reinterpret_cast<T*>(buffer_.data()); }

 private:
  HostBuffer buffer_;
};

/// One buffer of the ring. Everything a batch hands to a device copy (samples, labels, offsets)
/// comes from the ring's allocator, pinned with the CUDA backend, so that no copy reads pageable
/// memory (an asynchronous copy from pageable memory may wait for the copy to end).
struct Slot {
  HostBuffer samples;
  std::vector<std::int64_t> indices;
  HostArray<std::int32_t> labels;
  HostArray<std::int64_t> offsets;
  std::int64_t samples_bytes = 0;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
};

namespace {

/// Computes `step`'s batch into `slot`'s indices and returns where its samples, labels and offsets
/// go; adds the time computing the indices to `plan_seconds`.
BatchDestination plan_slot(const BatchReader& reader, const DatasetInfo& info, Slot& slot, const Sampler& sampler,
                           std::int64_t step, std::size_t capacity, std::int64_t fail_at_step,
                           std::int64_t read_delay_us, double& plan_seconds) {
  if (step == fail_at_step)
    STRIDER_THROW(SystemError, "pread failed reading step " + std::to_string(step) +
                                   ": injected I/O error (STRIDER_TEST_FAIL_READ)");
  if (read_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(read_delay_us));  // a slow disk
  const Clock::time_point plan_start = Clock::now();
  sampler.batch(step, slot.indices);
  plan_seconds += seconds_since(plan_start);
  const auto count = static_cast<std::int64_t>(slot.indices.size());
  slot.samples_bytes = reader.samples_bytes(slot.indices.data(), count);
  if (slot.samples_bytes > static_cast<std::int64_t>(capacity))
    STRIDER_THROW(UsageError, "batch at step " + std::to_string(step) + " needs " + std::to_string(slot.samples_bytes) +
                                  " bytes, the ring's buffers hold " + std::to_string(capacity));
  BatchDestination destination;
  destination.samples = slot.samples.data();
  destination.samples_capacity_bytes = static_cast<std::int64_t>(capacity);
  destination.labels = info.has_labels ? slot.labels.data() : nullptr;
  destination.offsets = info.variable_length ? slot.offsets.data() : nullptr;
  return destination;
}

/// Reads a planned batch row by row (PrefetcherOptions::read_rows_one_by_one).
void read_row_by_row(BatchReader& reader, const std::vector<std::int64_t>& indices,
                     const BatchDestination& destination) {
  std::int64_t at = 0;
  std::int64_t row_offsets[2] = {0, 0};
  if (destination.offsets != nullptr) destination.offsets[0] = 0;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::int64_t* index = &indices[k];
    const std::int64_t bytes = reader.samples_bytes(index, 1);
    reader.read(index, 1,
                BatchDestination{destination.samples + at, destination.samples_capacity_bytes - at,
                                 destination.labels != nullptr ? destination.labels + k : nullptr,
                                 destination.offsets != nullptr ? row_offsets : nullptr});
    if (destination.offsets != nullptr) destination.offsets[k + 1] = destination.offsets[k] + row_offsets[1];
    at += bytes;
  }
}

}  // namespace

/// What the I/O thread hands the consumer, in plan order.
struct Delivery {
  int slot = -1;             // a filled slot, or -1 for an error
  std::exception_ptr error;  // the I/O thread's failure
};

/// What one read cost, counted into the stats under the mutex by the thread that read.
struct Prefetcher::ReadFigures {
  std::exception_ptr error;
  double seconds = 0, plan_seconds = 0, copy_seconds = 0, labels_seconds = 0;
  std::int64_t bytes_read = 0, read_calls = 0;
  std::int64_t bytes_local = 0, bytes_remote = 0, remote_requests = 0;  // the in-memory store's

  /// The observer's event for this read of `steps` batches.
  PrefetchReadEvent event(std::int64_t steps, bool caller_thread, double handoff_seconds) const noexcept {
    PrefetchReadEvent read;
    read.steps = steps;
    read.caller_thread = caller_thread;
    read.seconds = seconds;
    read.plan_seconds = plan_seconds;
    read.copy_seconds = copy_seconds;
    read.labels_seconds = labels_seconds;
    read.handoff_seconds = handoff_seconds;
    return read;
  }
};

namespace {

/// The thread layout measurement (PrefetcherOptions::measure_layout): timed blocks of steps,
/// alternately with the I/O thread reading ahead and with the consumer reading, kRounds blocks of
/// each; a layout's time per step is the median of its blocks' (a block that a scheduler hiccup
/// slowed does not decide). A block is timed from one next() call to the block_steps-th after it,
/// so each step's time includes the consumer's own work, and counts the steps read meanwhile
/// (pipeline_detail::steps_read_in_block: what the ring held when it began and ended included). A
/// block starts once its layout has settled: an I/O-thread block skips its first steps while the
/// ring refills (after an epoch's start a whole ring: the I/O thread may have filled it while the
/// ranks agreed on the epoch), and a caller-thread block first takes the batches the I/O thread read
/// ahead. Every epoch starts with the I/O thread; a block cut by the end of an epoch is dropped, and
/// an epoch too short for any block ends the measurement undecided (the I/O thread stays). Which
/// layout is kept is keeps_caller_thread's rule (pipeline/thread_layout.hpp), the one the ranks
/// agree by.
struct LayoutTrial {
  static constexpr int kRounds = 3;
  static constexpr std::int64_t kSettleSteps = 8;
  bool active = false;
  int turn = 0;                     // the layout whose block is due: 0 the I/O thread, 1 the caller's thread
  bool timing = false;              // a block of `turn` is being timed
  std::int64_t block_steps = 64;    // steps per timed block: twice the ring's depth, at least 64
  std::int64_t settle_steps = 0;    // steps still to skip before timing an I/O-thread block
  std::int64_t steps_timed = 0;     // in the block being timed
  std::int64_t ready_at_start = 0;  // batches the ring held ready when the block's timing began
  std::int64_t epochs = 0;          // epochs started while measuring
  int blocks_this_epoch = 0;
  Clock::time_point block_start;
  std::vector<double> seconds[2];  // per step, per block; [0]: I/O thread, [1]: caller's thread
  LayoutMeasurement result;
};

/// The median of a few values.
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace

struct Prefetcher::State {
  std::unique_ptr<BatchReader> reader;
  // Reads windows of planned steps (PrefetcherOptions::lookahead_steps); used by whichever thread
  // reads, like the reader.
  std::unique_ptr<pipeline_detail::LookaheadReader> lookahead;
  std::shared_ptr<HostAllocator> allocator;
  std::vector<Slot> slots;
  std::size_t buffer_bytes = 0;     // samples area of each slot
  std::int64_t buffer_samples = 0;  // labels / indices capacity of each slot

  std::mutex mutex;
  std::condition_variable io_wake;        // the I/O thread waits here (work, free slots, shutdown)
  std::condition_variable consumer_wake;  // the consumer waits here (deliveries, a read ending)

  // The running epoch, read step by step by whichever thread reads (the I/O thread ahead of the
  // consumer, or the consumer itself); guarded by mutex.
  const Sampler* sampler = nullptr;  // null: nothing to read (no epoch, or stopped)
  std::int64_t epoch = 0;
  std::int64_t first_step = 0;
  std::int64_t end_step = 0;
  std::int64_t next_read_step = 0;     // the next step to read
  std::int64_t next_deliver_step = 0;  // the next step next() hands out
  std::uint64_t generation = 0;        // bumped by start_epoch and stop: a read begun before is dropped
  bool io_busy = false;                // the I/O thread is reading a step (without the mutex)
  bool io_sleeping = false;            // the I/O thread waits on io_wake
  bool shutdown = false;
  bool thread_reads = true;  // the I/O thread reads ahead; false: next() reads on the consumer's thread
  LayoutTrial trial;         // consumer side

  // Consumer side; guarded by mutex.
  std::deque<Delivery> ready;
  // A stack: a read takes the buffer freed last, still in cache (at w1 the ring is 64 x 64 KiB).
  std::vector<int> free_slots;
  int held = 0;
  bool epoch_open = false;         // an epoch was started and its end (or error) not yet delivered
  std::size_t consumer_wants = 0;  // > 0: the consumer sleeps until this many deliveries are ready

  // Stats; guarded by mutex.
  PrefetchStats stats;
  bool stats_clock_started = false;
  Clock::time_point stats_start;
  std::shared_ptr<PrefetchObserver> observer;  // null: no events
  pipeline_detail::ThreadUsage io_usage;       // with an observer, the I/O thread's usage when last sent (its own)

  std::int64_t fail_at_step = -1;  // test-only fault injection (STRIDER_TEST_FAIL_READ)
  std::int64_t read_delay_us = 0;  // test-only: every read this much slower (STRIDER_TEST_READ_DELAY_US)
  bool read_rows_one_by_one = false;
  std::int64_t batches_per_read = 1;   // the reader's wish; 1 with lookahead or one row at a time
  std::vector<BatchRead> batch_reads;  // fill_slots's, reused (one thread reads at a time)
  std::vector<int> caller_slots;       // the buffers of a read on the consumer's thread, reused
  std::thread thread;                  // not started without an I/O thread

  /// The I/O thread has a step to read and a buffer to read it into (under the mutex).
  bool io_can_read() const noexcept {
    return thread_reads && sampler != nullptr && next_read_step < end_step && !free_slots.empty();
  }
  /// Whether waking the I/O thread now would let it read: it sleeps and has a step and a buffer.
  /// Waking it otherwise (the consumer's thread reads, the epoch is all read or stopped) costs two
  /// context switches and it goes back to sleep. Every change that makes it able to read other
  /// than a buffer coming free (start_epoch, the layout back to the I/O thread, shutdown) wakes
  /// it on its own.
  bool io_wake_useful() const noexcept { return io_sleeping && io_can_read(); }
};

double expected_batch_bytes(const DatasetInfo& info, std::int64_t batch_size, std::int64_t max_tokens) noexcept {
  const double rows = batch_size > 0 ? static_cast<double>(batch_size) : static_cast<double>(info.num_samples);
  if (!info.variable_length) return rows * static_cast<double>(info.sample_bytes);
  const double token_bytes = static_cast<double>(element_bytes(info.element_type));
  const double mean_tokens =
      info.num_samples > 0 ? static_cast<double>(info.num_tokens) / static_cast<double>(info.num_samples) : 0.0;
  return token_bytes * (max_tokens > 0 ? static_cast<double>(max_tokens) : rows * mean_tokens);
}

int prefetch_depth(int requested, const DatasetInfo& info, std::int64_t batch_size, std::int64_t max_tokens,
                   int batches_held) noexcept {
  // One held batch: a ring of 1 is a valid (if slow) choice and an explicit one is kept.
  const int least = batches_held > 1 ? std::min(batches_held + 1, kMaxPrefetchDepth) : 1;
  if (requested > 0) return std::max(requested, least);
  constexpr double ring_bytes = 16.0 * 1024 * 1024;
  const int min_depth = std::max(4, least);
  const double batch_bytes = expected_batch_bytes(info, batch_size, max_tokens);
  if (batch_bytes <= 0) return min_depth;
  const double depth = std::ceil(ring_bytes / batch_bytes);
  return static_cast<int>(std::clamp(depth, static_cast<double>(min_depth), static_cast<double>(kMaxPrefetchDepth)));
}

// ---- Batch ---------------------------------------------------------------------------------

Batch::Batch(Batch&& other) noexcept {
  *this = std::move(other);
}

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    slot_ = std::exchange(other.slot_, -1);
    epoch_ = other.epoch_;
    step_ = other.step_;
    indices_ = other.indices_;
    samples_ = other.samples_;
    samples_bytes_ = other.samples_bytes_;
    labels_ = other.labels_;
    offsets_ = other.offsets_;
  }
  return *this;
}

Batch::~Batch() {
  release();
}

void Batch::release() noexcept {
  if (owner_ != nullptr) owner_->release_slot(slot_);
  owner_ = nullptr;
  slot_ = -1;
}

// ---- Prefetcher ----------------------------------------------------------------------------

Prefetcher::Prefetcher(std::unique_ptr<BatchReader> reader, PrefetcherOptions options)
    : depth_(options.depth), state_(std::make_unique<State>()) {
  if (!reader) STRIDER_THROW(UsageError, "the prefetcher needs a reader");
  if (options.depth < 1 || options.depth > kMaxPrefetchDepth)
    STRIDER_THROW(UsageError, "--prefetch depth must be in 1.." + std::to_string(kMaxPrefetchDepth) + ", got " +
                                  std::to_string(options.depth));
  info_ = reader->info();
  state_->reader = std::move(reader);
  state_->allocator = options.allocator ? std::move(options.allocator) : make_page_aligned_allocator();
  state_->slots.resize(static_cast<std::size_t>(depth_));
  for (int slot = 0; slot < depth_; ++slot) state_->free_slots.push_back(slot);
  const detail::TestHooks hooks = detail::test_hooks();
  state_->fail_at_step = hooks.fail_read_step;
  state_->read_delay_us = hooks.read_delay_us;
  state_->read_rows_one_by_one = options.read_rows_one_by_one;
  state_->observer = std::move(options.observer);
  if (options.lookahead_steps > 0)
    state_->lookahead = std::make_unique<pipeline_detail::LookaheadReader>(*state_->reader, options.lookahead_steps);
  if (!state_->lookahead && !state_->read_rows_one_by_one)
    state_->batches_per_read = std::max<std::int64_t>(1, state_->reader->batches_per_read());
  // The hdf5 engine is bound to the first thread that reads (io/owner_thread.hpp): no switching; with
  // lookahead the lookahead's own thread reads whatever the layout.
  state_->trial.active =
      options.io_thread && options.measure_layout && state_->reader->engine() != "hdf5" && !state_->lookahead;
  state_->trial.block_steps = std::max<std::int64_t>(64, 2 * static_cast<std::int64_t>(depth_));
  state_->trial.result.spare_core = options.spare_core;
  if (options.io_thread) state_->thread = std::thread([this] { io_loop(); });
}

Prefetcher::~Prefetcher() {
  release_reader();
}

std::unique_ptr<BatchReader> Prefetcher::release_reader() noexcept {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->shutdown = true;
    ++state_->generation;
  }
  state_->io_wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  state_->lookahead.reset();
  return std::move(state_->reader);
}

SharedView<std::int32_t> Prefetcher::labels() const {
  return state_->reader->labels();
}
SharedView<std::int64_t> Prefetcher::lengths() const {
  return state_->reader->lengths();
}

void Prefetcher::read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) {
  std::lock_guard<std::mutex> lock(state_->mutex);  // the I/O thread takes no command meanwhile
  if (state_->epoch_open || state_->io_busy)
    STRIDER_THROW(UsageError, "labels can be read from the prefetcher's reader only while no epoch runs");
  state_->reader->read_labels(first, count, out);
}

std::string Prefetcher::engine() const {
  return state_->reader->engine();
}

std::size_t Prefetcher::buffer_bytes() const noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->buffer_bytes;
}

void Prefetcher::start_epoch(const Sampler& sampler, std::int64_t first_step, std::int64_t end_step) {
  stop();
  State& s = *state_;
  const std::int64_t steps = sampler.num_steps();
  if (end_step < 0 || end_step > steps) end_step = steps;
  if (first_step < 0 || first_step > end_step)
    STRIDER_THROW(UsageError, "cannot start at step " + std::to_string(first_step) + " of an epoch of " +
                                  std::to_string(steps) + " steps");

  // Size the ring from this epoch's largest batch (the I/O thread is idle: the reader's const size
  // queries are safe here). Sequences need the plan's most elements of a batch, or else a scan of
  // the batches; fixed-size samples need neither.
  const std::int64_t max_samples = std::max<std::int64_t>(sampler.max_batch_size(), 1);
  std::int64_t max_bytes = max_samples * info_.sample_bytes;
  const std::int64_t max_elements = info_.variable_length ? sampler.max_batch_elements() : -1;
  if (max_elements >= 0) {
    max_bytes = max_elements * static_cast<std::int64_t>(element_bytes(info_.element_type));
  } else if (info_.variable_length) {
    std::vector<std::int64_t> indices;
    max_bytes = 0;
    for (std::int64_t step = first_step; step < end_step; ++step) {
      sampler.batch(step, indices);
      max_bytes =
          std::max(max_bytes, s.reader->samples_bytes(indices.data(), static_cast<std::int64_t>(indices.size())));
    }
  }
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (static_cast<std::size_t>(max_bytes) > s.buffer_bytes || max_samples > s.buffer_samples) {
      if (s.held > 0)
        STRIDER_THROW(UsageError, "release every batch before starting an epoch whose batches need larger buffers");
      // Grown in whole pages (the host allocators hand out pages anyway), and the samples' count so
      // that their offsets (one more than the samples, 8 bytes each) fill whole pages: an epoch
      // whose largest batch is a few bytes or samples larger than the last's (a bucketed plan's,
      // from epoch to epoch) then reuses the ring instead of allocating and touching every buffer
      // again.
      using pipeline_detail::kPageBytes, pipeline_detail::round_up;
      constexpr auto kOffsetsPerPage = static_cast<std::int64_t>(kPageBytes / sizeof(std::int64_t));
      const std::size_t bytes =
          round_up(std::max<std::size_t>(static_cast<std::size_t>(max_bytes), s.buffer_bytes), kPageBytes);
      const std::int64_t samples = round_up(std::max(max_samples, s.buffer_samples) + 1, kOffsetsPerPage) - 1;
      for (Slot& slot : s.slots) {
        slot.samples = HostBuffer();  // free before allocating: keep the peak at one ring
        slot.samples = HostBuffer(s.allocator, std::max<std::size_t>(bytes, 1));
        slot.indices.reserve(static_cast<std::size_t>(samples));
        if (info_.has_labels) slot.labels.allocate(s.allocator, samples);
        if (info_.variable_length) slot.offsets.allocate(s.allocator, samples + 1);
      }
      s.buffer_bytes = bytes;
      s.buffer_samples = samples;
      log_debug("prefetcher: ", depth_, " buffers of ", bytes, " bytes (", s.allocator->name(), ")");
    }
    if (s.lookahead) s.lookahead->start(sampler, first_step, end_step);
    s.sampler = &sampler;
    s.epoch = sampler.epoch();
    s.first_step = first_step;
    s.end_step = end_step;
    s.next_read_step = first_step;
    s.next_deliver_step = first_step;
    ++s.generation;
    s.epoch_open = true;
    if (s.trial.active) start_layout_epoch();
    if (!s.stats_clock_started) {
      s.stats_clock_started = true;
      s.stats_start = Clock::now();
    }
  }
  s.io_wake.notify_all();
}

std::optional<Batch> Prefetcher::next(const std::function<void()>& between_waits) {
  State& s = *state_;
  const Clock::time_point entered = Clock::now();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.trial.active && s.epoch_open) measure_layout_step();
  double waited_seconds = 0;
  bool slept = false;
  while (s.ready.empty()) {
    if (!s.epoch_open) return std::nullopt;
    if (s.next_deliver_step >= s.end_step) {
      s.epoch_open = false;
      s.trial.timing = false;
      return std::nullopt;
    }
    const bool thread_reads = s.thread.joinable() && s.thread_reads;
    if (!thread_reads && !s.io_busy) return next_on_caller_thread(lock, entered);
    if (s.held == depth_)
      STRIDER_THROW(UsageError, "the consumer holds all " + std::to_string(depth_) +
                                    " prefetch buffers; release a batch before asking for the next");
    // Sleep until half the ring is ready rather than one batch: a consumer that finds the ring
    // empty is faster than the reading, and waking it per batch costs two context switches per
    // batch for nothing (the I/O thread keeps reading meanwhile into the other half, so the job is
    // no slower). A wake-up costs the consumer about 20 us of CPU on a virtual machine (w1: a
    // quarter of the ring gave 0.05 sleeps and 2.1 us of the consumer's CPU per batch, half 0.03
    // and 1.7 us). The first batch of an epoch, the epoch's last ones and the buffers the consumer
    // holds bound the number.
    const std::int64_t remaining = s.end_step - s.next_deliver_step;
    std::int64_t wanted = s.next_deliver_step == s.first_step
                              ? 1
                              : std::max<std::int64_t>(1, static_cast<std::int64_t>(s.slots.size()) / 2);
    wanted = std::min({wanted, remaining, static_cast<std::int64_t>(depth_ - s.held)});
    if (!thread_reads) wanted = 1;  // a read the I/O thread began before it stopped reading
    s.consumer_wants = static_cast<std::size_t>(wanted);
    if (s.io_wake_useful()) s.io_wake.notify_all();  // never wait on an I/O thread left asleep (release_slot)
    const Clock::time_point wait_start = Clock::now();
    const auto delivered = [&] {
      return s.ready.size() >= s.consumer_wants || (!s.ready.empty() && s.ready.back().error);
    };
    if (between_waits) {
      while (!s.consumer_wake.wait_for(lock, kBetweenWaits, delivered)) {
        lock.unlock();
        try {
          between_waits();
        } catch (...) {
          lock.lock();
          s.consumer_wants = 0;
          throw;
        }
        lock.lock();
      }
    } else {
      s.consumer_wake.wait(lock, delivered);
    }
    s.consumer_wants = 0;
    slept = true;
    waited_seconds += seconds_since(wait_start);
  }
  s.stats.stall_seconds += waited_seconds;

  Delivery delivery = std::move(s.ready.front());
  s.ready.pop_front();
  if (delivery.error) {
    s.epoch_open = false;
    std::rethrow_exception(delivery.error);
  }
  Batch batch = deliver(delivery.slot);
  if (s.observer) s.observer->on_deliver(PrefetchDeliverEvent{seconds_since(entered) - waited_seconds, slept});
  return batch;
}

std::optional<Batch> Prefetcher::next_on_caller_thread(std::unique_lock<std::mutex>& lock,
                                                       std::chrono::steady_clock::time_point entered) {
  State& s = *state_;
  if (s.free_slots.empty())
    STRIDER_THROW(UsageError, "the consumer holds all " + std::to_string(depth_) +
                                  " prefetch buffers; release a batch before asking for the next");
  // The steps read together beyond the first are handed out by the next calls, from `ready`.
  std::vector<int>& slots = s.caller_slots;
  const std::int64_t step = take_next_read(slots);
  const Sampler& sampler = *s.sampler;
  const std::int64_t epoch = s.epoch;
  const std::size_t capacity = s.buffer_bytes;
  lock.unlock();

  const ReadFigures figures = fill_slots(slots, sampler, epoch, step, capacity);
  lock.lock();
  count_read(figures);
  s.stats.stall_seconds += figures.seconds;  // the consumer waited for the whole read
  if (s.observer) s.observer->on_read(figures.event(static_cast<std::int64_t>(slots.size()), true, 0.0));
  if (figures.error) {
    for (int slot : slots) s.free_slots.push_back(slot);
    s.next_read_step = s.end_step;  // the epoch ends at its error
    s.epoch_open = false;
    std::rethrow_exception(figures.error);
  }
  for (std::size_t k = 1; k < slots.size(); ++k) s.ready.push_back(Delivery{slots[k], nullptr});
  Batch batch = deliver(slots[0]);
  if (s.observer) s.observer->on_deliver(PrefetchDeliverEvent{seconds_since(entered) - figures.seconds, false});
  return batch;
}

Batch Prefetcher::deliver(int slot_index) {
  State& s = *state_;
  Slot& slot = s.slots[static_cast<std::size_t>(slot_index)];
  ++s.held;
  ++s.next_deliver_step;
  Batch batch;
  batch.owner_ = this;
  batch.slot_ = slot_index;
  batch.epoch_ = slot.epoch;
  batch.step_ = slot.step;
  batch.indices_ = &slot.indices;
  batch.samples_ = slot.samples.data();
  batch.samples_bytes_ = slot.samples_bytes;
  batch.labels_ = info_.has_labels ? slot.labels.data() : nullptr;
  batch.offsets_ = info_.variable_length ? slot.offsets.data() : nullptr;
  s.stats.batches += 1;
  s.stats.samples += static_cast<std::int64_t>(slot.indices.size());
  s.stats.useful_bytes += slot.samples_bytes;
  if (s.stats.time_to_first_batch_seconds < 0) s.stats.time_to_first_batch_seconds = seconds_since(s.stats_start);
  return batch;
}

Prefetcher::ReadFigures Prefetcher::fill_slots(const std::vector<int>& slot_indices, const Sampler& sampler,
                                               std::int64_t epoch, std::int64_t first_step,
                                               std::size_t capacity) noexcept {
  State& s = *state_;
  const Clock::time_point start = Clock::now();
  ReadFigures figures;
  ReadStats before{}, after{};
  // With lookahead a window may be read in the background: its own counters then, not the reader's.
  const auto reader_stats = [&s] { return s.lookahead ? s.lookahead->stats() : s.reader->stats(); };
  try {
    before = reader_stats();
    std::vector<BatchRead>& reads = s.batch_reads;
    reads.clear();
    for (std::size_t k = 0; k < slot_indices.size(); ++k) {
      Slot& slot = s.slots[static_cast<std::size_t>(slot_indices[k])];
      const std::int64_t step = first_step + static_cast<std::int64_t>(k);
      const BatchDestination destination = plan_slot(*s.reader, info_, slot, sampler, step, capacity, s.fail_at_step,
                                                     s.read_delay_us, figures.plan_seconds);
      if (s.lookahead) {
        s.lookahead->read(step, slot.indices, destination);
      } else if (s.read_rows_one_by_one) {
        read_row_by_row(*s.reader, slot.indices, destination);
      } else {
        reads.push_back(BatchRead{slot.indices.data(), static_cast<std::int64_t>(slot.indices.size()), destination});
      }
      slot.epoch = epoch;
      slot.step = step;
    }
    if (reads.size() == 1) {
      s.reader->read(reads[0].indices, reads[0].count, reads[0].destination);
    } else if (!reads.empty()) {
      s.reader->read_batches(reads.data(), static_cast<std::int64_t>(reads.size()));
    }
  } catch (...) {
    figures.error = std::current_exception();
  }
  try {
    after = reader_stats();
  } catch (...) {
    after = before;
  }
  figures.seconds = seconds_since(start);
  figures.labels_seconds = after.labels_seconds - before.labels_seconds;
  figures.copy_seconds = after.read_seconds - before.read_seconds - figures.labels_seconds;
  figures.bytes_read = after.bytes_read - before.bytes_read;
  figures.read_calls = after.read_calls - before.read_calls;
  figures.bytes_local = after.bytes_local - before.bytes_local;
  figures.bytes_remote = after.bytes_remote - before.bytes_remote;
  figures.remote_requests = after.remote_requests - before.remote_requests;
  return figures;
}

std::size_t Prefetcher::steps_per_read() const noexcept {
  const State& s = *state_;
  std::int64_t steps = std::min<std::int64_t>(s.batches_per_read, static_cast<std::int64_t>(s.free_slots.size()));
  steps = std::min({steps, s.end_step - s.next_read_step, std::max<std::int64_t>(1, depth_ / 4)});
  if (s.fail_at_step >= s.next_read_step && s.fail_at_step < s.next_read_step + steps)
    steps = std::max<std::int64_t>(1, s.fail_at_step - s.next_read_step);
  return static_cast<std::size_t>(std::max<std::int64_t>(1, steps));
}

std::int64_t Prefetcher::take_next_read(std::vector<int>& slots) {
  State& s = *state_;
  slots.resize(steps_per_read());
  for (int& slot : slots) {
    slot = s.free_slots.back();
    s.free_slots.pop_back();
  }
  const std::int64_t first_step = s.next_read_step;
  s.next_read_step += static_cast<std::int64_t>(slots.size());
  return first_step;
}

void Prefetcher::count_read(const ReadFigures& figures) noexcept {
  PrefetchStats& stats = state_->stats;
  stats.io_seconds += figures.seconds;
  stats.bytes_read += figures.bytes_read;
  stats.read_calls += figures.read_calls;
  stats.bytes_local += figures.bytes_local;
  stats.bytes_remote += figures.bytes_remote;
  stats.remote_requests += figures.remote_requests;
}

void Prefetcher::stop() noexcept {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  ++s.generation;  // a read in progress is dropped
  s.sampler = nullptr;
  s.io_wake.notify_all();
  s.consumer_wake.wait(lock, [&] { return !s.io_busy; });
  for (const Delivery& delivery : s.ready)
    if (delivery.slot >= 0) s.free_slots.push_back(delivery.slot);
  s.ready.clear();
  s.epoch_open = false;
  s.sampler = nullptr;
  if (s.lookahead) s.lookahead->stop();  // the I/O thread is idle
  s.trial.timing = false;
}

void Prefetcher::release_slot(int slot) noexcept {
  State& s = *state_;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.free_slots.push_back(slot);
    --s.held;
    // Only an I/O thread asleep with a step to read waits for this buffer: one that reads, or sleeps
    // for another reason (the consumer's thread reads, the epoch is all read), is not woken. With a
    // deep ring it is woken once a quarter of the ring is free, or when fewer than a quarter of it
    // is ready, rather than for every buffer: a wake-up per batch costs two context switches, a
    // sizeable part of a short step on a core shared with the consumer. next() wakes it too before
    // waiting, so that a consumer that holds buffers without releasing them never waits on a
    // sleeping I/O thread.
    const std::size_t quarter = std::max<std::size_t>(1, s.slots.size() / 4);
    wake = s.io_wake_useful() && (s.free_slots.size() >= quarter || s.ready.size() < quarter);
  }
  if (wake) s.io_wake.notify_all();
}

void Prefetcher::start_layout_epoch() {
  State& s = *state_;
  LayoutTrial& trial = s.trial;
  if (trial.epochs > 0 && trial.blocks_this_epoch == 0) {  // epochs too short to time a block
    trial.active = false;
    s.thread_reads = true;
    log_debug("prefetcher: epochs too short to measure the thread layout; reading on the I/O thread");
    return;
  }
  ++trial.epochs;
  trial.blocks_this_epoch = 0;
  trial.timing = false;  // a block never spans two epochs
  trial.settle_steps = std::max<std::int64_t>(LayoutTrial::kSettleSteps, depth_);
  s.thread_reads = true;
}

void Prefetcher::measure_layout_step() {
  State& s = *state_;
  LayoutTrial& trial = s.trial;
  if (trial.timing) {  // this call ends a step of the timed block
    if (++trial.steps_timed < trial.block_steps) return;
    // A caller's block ends once the steps it read in a group (batches_per_read > 1) are taken: each
    // step it read then counts with the consumer's work on it.
    if (trial.turn == 1 && !s.ready.empty()) return;
    const std::int64_t read = pipeline_detail::steps_read_in_block(trial.steps_timed, trial.ready_at_start,
                                                                   static_cast<std::int64_t>(s.ready.size()));
    trial.seconds[trial.turn].push_back(seconds_since(trial.block_start) / static_cast<double>(read));
    trial.timing = false;
    trial.blocks_this_epoch += 1;
    if (trial.seconds[0].size() >= LayoutTrial::kRounds && trial.seconds[1].size() >= LayoutTrial::kRounds) {
      LayoutMeasurement& result = trial.result;
      result.io_thread_us_per_step = 1e6 * median(trial.seconds[0]);
      result.caller_thread_us_per_step = 1e6 * median(trial.seconds[1]);
      result.steps_measured = LayoutTrial::kRounds * trial.block_steps;
      result.caller_thread = pipeline_detail::keeps_caller_thread(result.io_thread_us_per_step,
                                                                  result.caller_thread_us_per_step, result.spare_core);
      result.decided = true;
      trial.active = false;
      s.thread_reads = !result.caller_thread;
      if (s.thread_reads) s.io_wake.notify_all();
      log_debug("prefetcher: ", result.caller_thread ? "reading on the consumer's thread" : "reading on the I/O thread",
                " (per step: ", result.io_thread_us_per_step, " us with the I/O thread, ",
                result.caller_thread_us_per_step, " us on the consumer's thread)");
      return;
    }
    trial.turn = 1 - trial.turn;  // the other layout's block
    trial.settle_steps = LayoutTrial::kSettleSteps;
  }
  // Not timing: switch to the layout due, and start timing once it has settled.
  const bool thread_reads = trial.turn == 0;
  if (thread_reads != s.thread_reads) {
    s.thread_reads = thread_reads;
    if (thread_reads) s.io_wake.notify_all();
  }
  if (thread_reads) {
    if (trial.settle_steps > 0) {
      --trial.settle_steps;
      return;
    }
  } else if (!s.ready.empty() || s.io_busy) {
    return;  // batches the I/O thread read before the switch are taken first
  }
  trial.timing = true;
  trial.steps_timed = 0;
  trial.ready_at_start = static_cast<std::int64_t>(s.ready.size());
  trial.block_start = Clock::now();
}

void Prefetcher::use_layout(bool caller_thread) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.trial.active = false;
    s.trial.timing = false;
    s.trial.result.caller_thread = caller_thread;
    s.thread_reads = !caller_thread;
  }
  if (!caller_thread) s.io_wake.notify_all();
}

LayoutMeasurement Prefetcher::layout() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  LayoutMeasurement layout = state_->trial.result;
  layout.measuring = state_->trial.active;
  return layout;
}

PrefetchStats Prefetcher::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  PrefetchStats stats = state_->stats;
  stats.wall_seconds = state_->stats_clock_started ? seconds_since(state_->stats_start) : 0.0;
  return stats;
}

void Prefetcher::reset_stats() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stats = PrefetchStats{};
  state_->stats_clock_started = true;
  state_->stats_start = Clock::now();
}

void Prefetcher::send_io_usage() noexcept {
  State& s = *state_;
  if (!s.observer) return;
  const auto now = pipeline_detail::ThreadUsage::now();
  s.observer->on_io_usage(PrefetchIoUsageEvent{now.cpu_seconds - s.io_usage.cpu_seconds,
                                               now.voluntary_switches - s.io_usage.voluntary_switches,
                                               now.involuntary_switches - s.io_usage.involuntary_switches});
  s.io_usage = now;
}

void Prefetcher::io_loop() noexcept {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.observer) s.io_usage = pipeline_detail::ThreadUsage::now();
  std::vector<int> slots;  // the buffers of one read
  for (;;) {
    if (!s.shutdown && !s.io_can_read()) {
      send_io_usage();  // before sleeping: an account is current whenever the thread is idle
      const Clock::time_point idle_start = Clock::now();
      s.io_sleeping = true;
      while (!s.shutdown && !s.io_can_read()) {
        s.io_wake.wait(lock);
        if (s.observer)
          s.observer->on_idle(PrefetchIdleEvent{0.0, 1});  // every wake-up, one that finds nothing to read included
      }
      s.io_sleeping = false;
      if (s.observer) s.observer->on_idle(PrefetchIdleEvent{seconds_since(idle_start), 0});
    }
    if (s.shutdown) break;
    const std::uint64_t generation = s.generation;
    const Sampler& sampler = *s.sampler;
    const std::int64_t epoch = s.epoch, step = take_next_read(slots);
    const bool last = s.next_read_step == s.end_step;
    const std::size_t capacity = s.buffer_bytes;
    s.io_busy = true;
    lock.unlock();

    const ReadFigures figures = fill_slots(slots, sampler, epoch, step, capacity);
    const Clock::time_point handoff_start = Clock::now();
    lock.lock();
    s.io_busy = false;
    if (s.generation != generation) {  // stopped, or a new epoch started, meanwhile
      for (int slot : slots) s.free_slots.push_back(slot);
      s.consumer_wake.notify_all();  // stop() waits for the read to end
      continue;
    }
    count_read(figures);
    if (last) send_io_usage();  // current when the consumer takes the epoch's last batch
    if (figures.error) {
      for (int slot : slots) s.free_slots.push_back(slot);
      s.ready.push_back(Delivery{-1, figures.error});
      s.next_read_step = s.end_step;  // the epoch ends at its error
    } else {
      for (int slot : slots) s.ready.push_back(Delivery{slot, nullptr});
    }
    if (s.consumer_wants > 0 && (s.ready.size() >= s.consumer_wants || figures.error)) s.consumer_wake.notify_all();
    if (s.observer)
      s.observer->on_read(figures.event(static_cast<std::int64_t>(slots.size()), false, seconds_since(handoff_start)));
  }
  s.io_busy = false;
  s.consumer_wake.notify_all();
}

}  // namespace strider
