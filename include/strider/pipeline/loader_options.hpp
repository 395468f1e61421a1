#pragma once
/// \file
/// What a Loader is built from (LoaderOptions), and the table of the options that several apps
/// share: for each one its name, its one default, its one help text, and a setter from text onto
/// LoaderOptions. The apps build their command lines from the table (apps/common/cli.cpp), so
/// `--help` lists these options the same way everywhere; a binding can take the same names (with
/// '_' for '-'), defaults and help as keyword arguments.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strider/io/batch_reader.hpp"
#include "strider/pipeline/host_allocator.hpp"
#include "strider/pipeline/memory_store.hpp"
#include "strider/pipeline/prefetch_observer.hpp"
#include "strider/sampling/factory.hpp"

namespace strider {

/// How a Loader splits the dataset between ranks.
enum class LoaderSplit {
  /// The sampler's plan (SamplerOptions::mode): every rank runs the same number of steps.
  sampler,
  /// Evaluation: every sample exactly once, no padding, in index order per rank
  /// (ExactSplitSampler; the sampler's mode is ignored). Ranks may get different numbers of steps,
  /// so a caller runs no collective per step.
  exact,
};

/// Samples per rank per step unless asked otherwise, in every app and in LoaderOptions{}.
inline constexpr std::int64_t kDefaultBatchSize = 32;
/// The largest per-rank batch size taken: far beyond any memory, and small enough that a global batch
/// (times any world size) and its step arithmetic cannot overflow 64 bits.
inline constexpr std::int64_t kMaxBatchSize = std::int64_t{1} << 40;

/// What the Loader offers for measuring it: switches that each turn off one saving so that a
/// benchmark can show what it saves, and an observer of its events. Every setting yields the same
/// batches.
struct LoaderDiagnostics {
  /// The distributed sampler with shuffle: each epoch's order is shuffled once per node, by one
  /// rank into memory the node's ranks share, and every rank copies its positions out, instead of
  /// every rank shuffling all N; the bucketed sampler: each epoch's whole plan is made once per
  /// node and copied by the others (pipeline/node_order.hpp). Off (`--plan-per-rank`) measures what
  /// it saves.
  bool plan_per_node = true;
  /// One read() call per sample instead of one per batch (measures what batching saves).
  bool read_rows_one_by_one = false;
  /// Receives the prefetcher's read, deliver and wait events and the epoch plans
  /// (strider/pipeline/prefetch_observer.hpp; strider-bench's account subscribes one).
  std::shared_ptr<PrefetchObserver> observer = nullptr;
};

/// Everything a Loader is built from. The defaults are the option table's defaults.
struct LoaderOptions {
  LoaderOptions() { sampler.batch_size = kDefaultBatchSize; }

  /// The dataset: one HDF5 file, or its shards as a comma list, a glob, a directory or @list.txt
  /// (strider/io/data_paths.hpp).
  std::string data_path;
  /// Dataset names, engine, copy threads and whether labels are required (require_labels: a file
  /// without labels is an error). labels_in_memory is ignored: see the field below.
  ReaderOptions reader;
  /// The sampler's mode, per-rank batch size (kDefaultBatchSize; 0: the whole epoch is one batch,
  /// `--batch-size all`) and the mode's options. The Loader fills dataset_size, labels, lengths and
  /// seed.
  SamplerOptions sampler;
  /// The seed of every epoch's order. None: rank 0 draws one, logs it, and broadcasts it (0 for
  /// LoaderSplit::exact, which has no order). Given: rank 0's value is broadcast (ranks cannot
  /// disagree).
  std::optional<std::int64_t> seed;
  int prefetch = 0;  ///< batches read ahead per rank, 1..kMaxPrefetchDepth; 0: auto (prefetch_depth)
  /// The most bytes the ring's batches may take on this rank (0: no limit), for batches so large
  /// that the auto depth would not fit in memory (a 1 GB batch, 4 deep, on every rank of a node).
  /// The auto depth is lowered to fit; a batch that alone does not fit, or an explicit depth that
  /// does not, is a UsageError at construction.
  std::int64_t max_ring_bytes = 0;
  /// Memory of the ring's buffers; null: page-aligned. A trainer passes its backend's allocator
  /// (pinned host memory where the backend copies to a GPU).
  std::shared_ptr<HostAllocator> allocator;
  /// Batches the caller holds at once: 2 for a trainer that keeps the next batch staged on a device
  /// while it computes on the current one (StepBatches with a backend whose overlaps_copies() is
  /// true), else 1. The ring is then at least batches_held + 1 deep, `prefetch` included, so that
  /// the I/O thread can always read ahead (prefetch_depth).
  int batches_held = 1;
  /// Every label held in memory (4 bytes per sample) or read with each batch. None: held only
  /// when the sampler's plan needs them (sampler_needs_labels), so that memory does not grow with N.
  std::optional<bool> labels_in_memory;
  LoaderSplit split = LoaderSplit::sampler;
  std::int64_t max_steps_per_epoch = 0;  ///< at most this many steps of each epoch (0: all)
  /// Epochs the caller will run; plan-ahead never plans past the last. 0: unknown (always plans the
  /// next epoch).
  std::int64_t epochs = 0;
  /// Plan epoch e+1 on another thread while epoch e is read (set_epoch can cost O(N): the
  /// distributed sampler's permutation). The batches are the same with it on or off; it holds a
  /// second plan in memory. Where some rank has no core to spare and every rank reads on its
  /// consumer's thread (io_thread off, or kept there by the layout measurement), no core idles for
  /// that thread: each epoch is then planned when it starts, except the distributed sampler's,
  /// whose order one rank shuffles for its node's others to wait for (the second plan is still
  /// held, for queries).
  bool plan_ahead = true;
  /// With plan_ahead: that thread runs only where a core would otherwise idle (Linux's SCHED_IDLE),
  /// taking next to no time from the ranks' reads and steps; an epoch whose plan is not done when
  /// it starts waits for it, leaving it the core. false: it runs at the caller's priority, for jobs
  /// whose threads keep every core busy while they only wait (spinning on a GPU or in MPI on as
  /// many ranks as cores), where an idle-priority plan would wait for the epoch's end, and for
  /// cores that other processes keep busy. (Linux lets a thread back out of SCHED_IDLE only with
  /// CAP_SYS_NICE or a raised RLIMIT_NICE, so the Loader does not raise it when it waits.)
  bool plan_on_idle_cores = true;
  /// true: a background I/O thread reads ahead (the prefetcher). false: batches are read on the
  /// caller's thread when it asks for them (measuring the reader, a rank with no core to spare).
  bool io_thread = true;
  /// With io_thread: during the first epoch(s) time blocks of steps (the caller's own work
  /// included) with the I/O thread reading ahead and with the caller reading, and keep reading on
  /// the caller's thread if that is clearly faster, or, where a rank has no core to spare for its
  /// I/O thread, unless the I/O thread is clearly faster (rank 0 logs the outcome at the next
  /// epoch()).
  /// The batches are the same either way. Not with the hdf5 engine (its reads stay on the thread
  /// that read first). `--io-thread auto|yes|no` sets both fields.
  bool measure_thread_layout = true;
  /// At every epoch's start the ranks check that every shard's size and modification time are
  /// those it had when opened, and refuse to go on otherwise.
  bool check_data_unchanged = true;
  /// The in-memory store (`--store memory`): the dataset loaded once into node memory at
  /// construction, every batch served from memory (strider/pipeline/memory_store.hpp).
  StoreOptions store;
  /// `--lookahead L` (no store, the hdf5 engine on chunked data): the rows of L planned batches are
  /// read in one pass in chunk order, so that a chunk is decompressed once per L batches rather than
  /// once per batch; the next L batches are read while these are delivered (two windows in memory).
  /// 0: off. Elsewhere a no-op, logged.
  std::int64_t lookahead = 0;
  /// Switches that exist to measure what a design choice saves (strider-bench, strider-inspect
  /// read-speed); a trainer leaves them alone.
  LoaderDiagnostics diagnostics;
};

/// The type of an option's value, as a command line parses it.
enum class OptionType {
  flag,   ///< present or not (text: true|false, 1|0, yes|no, on|off)
  int32,  ///< an integer within int
  int64,  ///< an integer
  text,   ///< any text (a name, a list)
};

/// One option shared by several apps: `--name`, its type, default, help and group.
struct LoaderOption {
  std::string name;   ///< "batch-size"
  std::string group;  ///< "data", "sampling", "pipeline", "store" or "diagnostics" (options for measuring)
  OptionType type = OptionType::text;
  std::string default_text;  ///< the default as text; empty: none (the option stays unset)
  std::string help;          ///< one line for --help and docstrings
  /// Parses `text` onto the options; throws UsageError naming `--name` for a bad value.
  std::function<void(LoaderOptions&, std::string_view text)> set;
  /// The option's current value as text (what set() parses back to the same value; "" for unset).
  std::function<std::string(const LoaderOptions&)> get;
};

/// Every shared option, grouped (data, sampling, pipeline, store, diagnostics), in the order --help lists them. Each
/// default is LoaderOptions{}'s value. Thread-safe (built once).
const std::vector<LoaderOption>& loader_option_table();

/// The table's entry for `name` ("batch-size"); throws UsageError "unknown option '--name'".
const LoaderOption& loader_option(std::string_view name);

/// Sets option `name` from text; throws UsageError naming `--name` for an unknown name or a bad
/// value.
void set_loader_option(LoaderOptions& options, std::string_view name, std::string_view text);

}  // namespace strider
