#pragma once
/// \file
/// The one way into the pipeline. A Loader opens the file, agrees on the seed, builds the sampler
/// from whatever it needs (labels, lengths) and owns the prefetcher, like PyTorch's DataLoader:
///
///   Loader loader(comm, options);                          // collective
///   for (std::int64_t e = 0; e < epochs; ++e)
///     for (Batch batch : loader.epoch(e)) step(batch);      // epoch e's plan; no set_epoch to forget
///   loader.close();                                        // this rank's files; not collective
///
/// A trainer builds its backend first and passes the backend's host allocator, then builds its
/// model from loader.dataset().
///
/// Errors on one rank only. Construction and epoch() are collective and agree on their
/// errors (every rank throws the same AgreedError). Reading a batch is not collective: an I/O
/// error reaches only the rank that read it, as the original exception out of the loop or next().
/// If the ranks run collectives per step (a gradient all-reduce), take each batch with
/// LoaderEpoch::next() inside the step's comm.collective_try, so that the failure reaches every
/// rank as an AgreedError instead of leaving the others in the all-reduce. Do not call epoch()
/// inside a collective_try whose body can fail on some ranks only (it runs collectives).
///
/// Threads: one consumer thread uses a Loader and its epochs; Batches may be released from any
/// thread. The Loader's own threads: the prefetcher's I/O thread (unless io_thread is false; with
/// measure_thread_layout it may stop reading once the caller's thread proved faster) and, between
/// epochs, the thread that plans the next one (plan_ahead), on cores that would otherwise idle
/// (plan_on_idle_cores).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/core/shared_view.hpp"
#include "strider/pipeline/loader_options.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

class Loader;

/// One epoch of a Loader: the batches of this rank in plan order, as a range (`for (Batch b :
/// epoch)`) or one at a time (next()). Each batch is the caller's until it is dropped (destroyed
/// or Batch::release()), so a trainer can hold batch k+1 (staged to its GPU) while it computes on
/// batch k; the ring has LoaderOptions::prefetch buffers, and asking for a batch while holding all
/// of them throws UsageError. Destroying the epoch early (a break, an exception) stops its reads;
/// batches still held stay valid. Move-only; it must not outlive its Loader.
class LoaderEpoch {
 public:
  /// The end of the range.
  struct End {};
  /// An input iterator: `*it` moves the current batch out (take it by value: `Batch b = *it`).
  class Iterator {
   public:
    Batch operator*() { return std::move(*current_); }
    Iterator& operator++() {
      current_ = epoch_->next();
      return *this;
    }
    bool operator!=(End) const noexcept { return current_.has_value(); }
    bool operator==(End) const noexcept { return !current_.has_value(); }

   private:
    friend class LoaderEpoch;
    Iterator(LoaderEpoch* epoch, std::optional<Batch> first) : epoch_(epoch), current_(std::move(first)) {}
    LoaderEpoch* epoch_;
    std::optional<Batch> current_;
  };

  LoaderEpoch(LoaderEpoch&& other) noexcept;
  LoaderEpoch& operator=(LoaderEpoch&& other) noexcept;
  LoaderEpoch(const LoaderEpoch&) = delete;
  LoaderEpoch& operator=(const LoaderEpoch&) = delete;
  /// Stops the epoch's reads if it is still the Loader's running epoch. Never throws.
  ~LoaderEpoch();

  /// Reads the first batch (blocks until it is there). Call once per epoch.
  Iterator begin() { return Iterator(this, next()); }
  End end() const noexcept { return {}; }

  /// The next batch in plan order, blocking until it is read; nullopt after the epoch's last step.
  /// Rethrows the reader's error (on this rank only). Throws UsageError when the caller holds
  /// every buffer of the ring, or when a later Loader::epoch() call replaced this epoch.
  /// `between_waits`: see Prefetcher::next (what it throws ends the epoch, as a read error does).
  std::optional<Batch> next(const std::function<void()>& between_waits = nullptr);

  std::int64_t epoch() const noexcept { return epoch_; }
  /// The first step this epoch delivers (non-zero after Loader::resume).
  std::int64_t first_step() const noexcept { return first_step_; }
  /// One past the last step it delivers (Loader::steps(epoch)).
  std::int64_t end_step() const noexcept { return end_step_; }

 private:
  friend class Loader;
  LoaderEpoch(Loader* loader, std::uint64_t id, std::int64_t epoch, std::int64_t first_step, std::int64_t end_step)
      : loader_(loader), id_(id), epoch_(epoch), first_step_(first_step), end_step_(end_step) {}
  Loader* loader_ = nullptr;
  std::uint64_t id_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t first_step_ = 0;
  std::int64_t end_step_ = 0;
};

/// Reader, sampler and prefetcher of one dataset, built from LoaderOptions. Not copyable or movable
/// (epochs and batches point to it).
class Loader {
 public:
  /// Collective over comm: every rank must call with the same options. Agrees on the seed (see
  /// LoaderOptions::seed), opens and validates the file (open_reader), builds the sampler from the
  /// reader's labels and lengths, and starts the prefetcher. Every failure (bad options, a missing
  /// or unusable file, options the sampler refuses) is agreed: every rank throws the same
  /// AgreedError and nothing is left open. `comm` must outlive the Loader.
  Loader(const Communicator& comm, LoaderOptions options);

  /// Ends the running epoch and the planning thread and frees everything; never throws. Every
  /// batch must have been dropped. At a normal scope exit it closes what it opened (or what close()
  /// left), which with the in-memory store is collective (its shared window: every rank must
  /// destroy its Loader; a rank that waited STRIDER_COLLECTIVE_WARN_S seconds for the others says
  /// so; each engine opens its files on its own rank, so their close is local);
  /// while an exception unwinds the stack, it leaves the store (and an hdf5-engine file, which
  /// HDF5 closes at MPI_Finalize) open instead (abandon()), so that a failure on one rank can never
  /// block in a collective close while the other ranks wait elsewhere.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Collective over comm: every rank must call with the same epoch. Starts epoch `epoch` (any
  /// order of epochs is fine): ends a running epoch, checks that the file did not change since it
  /// was opened (LoaderOptions::check_data_unchanged: size and modification time), plans the epoch
  /// (or takes the plan made ahead), checks that every rank has the same number of steps (not for
  /// LoaderSplit::exact), and starts reading. After resume(state), epoch(state.epoch) starts at the
  /// saved step. Failures are agreed (AgreedError on every rank).
  LoaderEpoch epoch(std::int64_t epoch);

  /// Makes the next epoch(state.epoch) start where the state was saved. Checks the state against
  /// this Loader's sampler: mode, configuration hash (dataset size, options, seed, class weights)
  /// and global batch (world size x per-rank batch: resuming at another world size works where the
  /// mode allows it with the same global batch). Without an explicit LoaderOptions::seed the
  /// state's seed is taken. Not collective; throws UsageError naming what differs (the same on
  /// every rank given the same state: call it inside collective_try when ranks read the state
  /// themselves). Ends a running epoch. Returns the step epoch(state.epoch) will start at (the
  /// epoch's step count when the state was saved at its end).
  std::int64_t resume(const SamplerState& state);

  /// The state after every batch yielded so far in the current epoch (the one last started, or
  /// resumed): what a checkpoint holds after the caller finished all of them. May plan the epoch
  /// (not collective).
  SamplerState state();
  /// The state after `steps_done` steps of the current epoch, for a trainer that holds a batch
  /// ahead: after finishing the step of batch b, state_after(b.step() + 1).
  SamplerState state_after(std::int64_t steps_done);

  /// Steps epoch `epoch` has (at most LoaderOptions::max_steps_per_epoch): the same on every rank
  /// but for LoaderSplit::exact; bucketed epochs differ in length. May plan the epoch (O(N) for some
  /// modes); not collective.
  std::int64_t steps(std::int64_t epoch);
  /// Throws UsageError when epoch `epoch` has no step at all (batches larger than a rank's share
  /// with drop_last_batch, say), naming the dataset size, ranks and batch: a job would run, learn
  /// nothing and end as if it had succeeded. May plan the epoch; not collective (the same on every
  /// rank: call it inside collective_try).
  void require_steps(std::int64_t epoch);

  /// What open_reader found in the file (stays valid after close()).
  const DatasetInfo& dataset() const noexcept;
  /// The engine reading it: "hdf5", "direct" or "mmap" (what "auto" chose).
  const std::string& engine() const noexcept;
  /// The agreed seed.
  std::int64_t seed() const noexcept;
  /// The ring depth in use (LoaderOptions::prefetch, or the auto depth).
  int prefetch_depth() const noexcept;
  /// The options in force: the seed and the sampler's dataset size filled in (its labels and
  /// lengths point into the reader, and are null after close()).
  const LoaderOptions& options() const noexcept;

  /// What the in-memory store holds and what its load took (LoaderOptions::store); null without the
  /// store. Stays valid after close().
  const StoreInfo* store() const noexcept;
  /// This rank's proportional share of the store's node memory (MemoryStore::resident_bytes); -1
  /// without the store or after close(). Not collective.
  std::int64_t store_resident_bytes() const;

  /// The prefetch and read counters since construction (or reset_stats()); the last values after close().
  PrefetchStats stats() const;
  /// This rank's thread layout measurement (LoaderOptions::measure_thread_layout): each layout's time
  /// per step and the one kept; `decided` is false while measuring or when not measuring.
  LayoutMeasurement thread_layout() const;
  void reset_stats();

  /// Every label, when held in memory (LoaderOptions::labels_in_memory, or a sampler that needs
  /// them); empty otherwise. With the store, a view of the node's shared segment (held once per
  /// node). Valid until close(); throws UsageError after it.
  SharedView<std::int32_t> labels() const;
  /// Sequences: every row's length in tokens; empty for fixed-size samples. Held as labels() is.
  SharedView<std::int64_t> lengths() const;
  /// labels[first, first + count) into out, from memory or from the file. Only while no epoch is
  /// reading (before the first, or after one ended or was left); not collective.
  void read_labels(std::int64_t first, std::int64_t count, std::int32_t* out);

  /// New class weights for the weighted sampler (values agreed across ranks by the caller, e.g.
  /// with update_class_weights), in force from the next epoch() on; they are part of the
  /// configuration a saved state must match. Ends a running epoch. Not collective; throws
  /// UsageError for other modes or invalid weights (the same on every rank).
  void set_class_weights(std::vector<double> weights);

  /// Not collective: a rank may close alone (the others read on). Ends the running epoch and closes
  /// this rank's files (every engine opens them with a local driver). The in-memory store goes on
  /// answering the other ranks; its teardown is collective and waits for the Loader's destruction
  /// (every rank must destroy its Loader, as without close()). Batches still held stay valid until
  /// they are dropped; the ring's memory is freed when the Loader is destroyed. Afterwards only
  /// dataset(), engine(), seed(), options() and stats() may be used; calling close() again does nothing.
  void close();
  /// Not collective: ends the running epoch and leaves the store (also one kept since close()) and
  /// an hdf5-engine file to the end of the process, as the destructor does while an exception unwinds (HDF5 closes its
  /// files at MPI_Finalize or the job's abort), so that an error path on one rank never waits in a collective close;
  /// the other engines close their files now. For callers whose error path is not C++ unwinding (a binding). Batches
  /// still held stay valid as after close(). Afterwards the Loader counts as closed. Never throws.
  void abandon() noexcept;
  bool closed() const noexcept;

 private:
  friend class LoaderEpoch;
  struct State;
  std::optional<Batch> next_batch(std::uint64_t id, const std::function<void()>& between_waits);
  void end_epoch(std::uint64_t id) noexcept;
  std::unique_ptr<State> state_;
};

}  // namespace strider
