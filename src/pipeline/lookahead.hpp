#pragma once
// Plan-aware reads without the store (LoaderOptions::lookahead): the rows of a window of L planned
// steps are read with one BatchReader::read() call, sorted and distinct (file order), so that with
// chunked data read through HDF5 each chunk the window touches is read and decompressed once per
// window instead of once per batch; each step's batch is then copied out of the window. While one
// window is delivered the next is read on a thread of its own: two windows in memory at most. That
// one thread makes every read of the reader (the hdf5 engine accepts reads from one thread only).

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "strider/io/batch_reader.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider::pipeline_detail {

/// Chunk decompressions of a lookahead epoch with a cache of decompressed chunks, simulated from
/// the plan alone: `windows[w]` lists the distinct chunks window w reads (its one pass, in any
/// order), and a chunk is decompressed when a window needs it and the cache does not hold it. The
/// cache holds at most `cache_chunks` chunks between and within windows and keeps the ones whose
/// next use is soonest (Belady's rule, optimal for a known future: a chunk decompressed now is not
/// kept when every cached chunk is needed sooner). With 0 this is the sum of the windows' distinct
/// chunks, what --lookahead does today; the result is never below the number of distinct chunks.
std::int64_t count_chunk_decompressions(const std::vector<std::vector<std::int64_t>>& windows,
                                        std::int64_t cache_chunks);

class LookaheadReader {
 public:
  /// Reads through `reader`, which must outlive this object; from now on only this object calls it.
  LookaheadReader(BatchReader& reader, std::int64_t window_steps);
  /// Waits for a window being read. Never throws.
  ~LookaheadReader();
  LookaheadReader(const LookaheadReader&) = delete;
  LookaheadReader& operator=(const LookaheadReader&) = delete;

  /// Delivers steps [first_step, end_step) of the sampler's current epoch from now on (the sampler
  /// must not change until stop() or the next start()). Ends a previous epoch first.
  void start(const Sampler& sampler, std::int64_t first_step, std::int64_t end_step);
  /// Ends the epoch: waits for a window being read and drops the windows. Never throws.
  void stop() noexcept;
  /// Fills `destination` with step `step`'s batch, whose indices are `indices`. Steps come in
  /// increasing order within [first_step, end_step). Throws the reader's errors.
  void read(std::int64_t step, const std::vector<std::int64_t>& indices, const BatchDestination& destination);
  /// The reader's counters as of the last window this object finished reading (a window being read
  /// in the background is not counted yet: the reader is not read from two threads).
  ReadStats stats() const { return stats_; }

 private:
  struct Window {
    std::int64_t first_step = 0, end_step = 0;
    std::vector<std::int64_t> rows;     // sorted, distinct
    std::vector<std::byte> samples;     // the rows' samples (or tokens) back to back
    std::vector<std::int32_t> labels;   // one per row, when the dataset has labels
    std::vector<std::int64_t> offsets;  // rows + 1 byte offsets into samples
    ReadStats read;                     // what reading it cost (the reader's counters' change)
  };
  /// Reads the window of steps [first, end) (on any thread; the only caller of the reader meanwhile).
  void read_window(Window& window, std::int64_t first, std::int64_t end) const;
  /// Starts reading the window after `current_` in the background, if the epoch has one.
  void read_next_in_background();
  /// Runs `task` on the reading thread (started on first use; the caller's thread for good when no
  /// thread can be started), after the task already there. Does not wait.
  void submit(std::function<void()> task);
  /// Waits for the submitted task; rethrows its error. False when none was pending.
  bool wait();
  /// The reading thread's loop.
  void run_tasks();
  /// Makes the window holding `step` current (waits for or reads it).
  void advance_to(std::int64_t step);

  BatchReader& reader_;
  std::int64_t window_steps_;
  const Sampler* sampler_ = nullptr;
  std::int64_t end_step_ = 0;
  std::unique_ptr<Window> current_, next_;
  ReadStats stats_;

  // The reading thread and its one pending task (guarded by mutex_).
  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> task_;  // submitted, not yet finished
  bool pending_ = false;        // a task was submitted and wait() has not collected it
  bool running_ = false;        // task_ is being run or waits to be
  bool quit_ = false;
  bool no_thread_ = false;    // no thread could be started: tasks run in wait()
  std::exception_ptr error_;  // the finished task's error
  std::thread thread_;
};

}  // namespace strider::pipeline_detail
