#include "strider/pipeline/loader.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <future>
#include <mutex>
#include <set>
#include <utility>

#include "comm/backoff.hpp"
#include "pipeline/node_order.hpp"
#include "pipeline/option_checks.hpp"
#include "pipeline/thread_layout.hpp"
#include "pipeline/thread_usage.hpp"
#include "strider/comm/seed.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/sampling/bucketed_sampler.hpp"
#include "strider/sampling/exact_split_sampler.hpp"

namespace strider {

namespace {

/// From now on the calling thread runs only where a core would otherwise idle (Linux's SCHED_IDLE;
/// elsewhere, or where the system refuses, it runs as it did). For the plan-ahead thread
/// (LoaderOptions::plan_on_idle_cores): its plan is needed only when the next epoch starts, and a
/// rank that waits for it then leaves it its core; until then it takes next to no time from the
/// ranks' reads and steps. At normal priority it takes slices
/// of whichever rank's core the scheduler places it on, and the epoch, which ends on all ranks
/// together, waits for that rank (measured: w3 at 2 ranks on 2 cores reads 5% more samples/s with
/// the plan on idle cores, medians of 20 pairs; w1 and w4 alike either way).
void plan_on_idle_cores() noexcept {
#ifdef SCHED_IDLE
  sched_param idle{};
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
#endif
}

/// Size and modification time of a file: a cheap check that the data did not change.
std::pair<std::int64_t, std::int64_t> file_state(const std::string& path) noexcept {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {-1, -1};
  return {static_cast<std::int64_t>(info.st_size),
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
}

/// file_state of every shard, in order.
std::vector<std::pair<std::int64_t, std::int64_t>> shard_states(const DatasetInfo& info) noexcept {
  std::vector<std::pair<std::int64_t, std::int64_t>> states;
  states.reserve(info.shards.size());
  for (const DatasetShard& shard : info.shards) states.push_back(file_state(shard.path));
  return states;
}

/// Keeps a reader that must not be closed now (the store's, or an hdf5-engine reader, while an error
/// unwinds, maybe on this rank only: the store's close would wait for the other ranks, and HDF5 is
/// left to close its files once, at exit) until the process ends, never
/// destroying it: MPI_Finalize (HDF5 closes its files there, on every rank) or the job's abort
/// closes the file. Held from a static, so leak checkers count it as reachable, not lost.
void keep_open_until_exit(std::unique_ptr<BatchReader> reader) noexcept {
  static std::mutex mutex;
  static auto* const kept = new std::vector<std::unique_ptr<BatchReader>>();  // never freed, as said
  try {
    std::lock_guard<std::mutex> lock(mutex);
    kept->push_back(std::move(reader));
  } catch (...) {
    static_cast<void>(reader.release());
  }
}

/// The checks the option table does not make (it checks each value on its own).
void check_options(const LoaderOptions& options) {
  if (options.data_path.empty()) STRIDER_THROW(UsageError, "no dataset file given (--data)");
  detail::check_prefetch_option(options.prefetch);
  detail::check_option_at_least("batch-size", options.sampler.batch_size, 0);
  if (options.sampler.batch_size > kMaxBatchSize)
    STRIDER_THROW(UsageError, "--batch-size must be at most " + std::to_string(kMaxBatchSize) + ", got " +
                                  std::to_string(options.sampler.batch_size));
  detail::check_option_at_least("num-samples", options.sampler.num_samples, 0);
  detail::check_option_at_least("copy-threads", options.reader.copy_threads, 1);
  detail::check_option_at_least("max-open-files", options.reader.max_open_files, 1);
  if (options.batches_held < 1 || options.batches_held >= kMaxPrefetchDepth)
    STRIDER_THROW(UsageError, "LoaderOptions::batches_held must be in 1.." + std::to_string(kMaxPrefetchDepth - 1) +
                                  ", got " + std::to_string(options.batches_held));
  detail::check_option_at_least("lookahead", options.lookahead, 0);
  check_store_options(options.store);
  if (options.max_steps_per_epoch < 0)
    STRIDER_THROW(UsageError, "LoaderOptions::max_steps_per_epoch must be >= 0, got " +
                                  std::to_string(options.max_steps_per_epoch));
  if (options.max_ring_bytes < 0)
    STRIDER_THROW(UsageError,
                  "LoaderOptions::max_ring_bytes must be >= 0, got " + std::to_string(options.max_ring_bytes));
  if (options.epochs < 0)
    STRIDER_THROW(UsageError, "LoaderOptions::epochs must be >= 0, got " + std::to_string(options.epochs));
}

/// The options every rank must give the same, named as a user gave them: the option table's, but
/// those that only size this rank's own resources (and the seed: rank 0's is broadcast), and the
/// fields outside the table that shape the plan. Ranks that differ in any of them would plan
/// different epochs (a rank's sampler, batch size or shuffle decides which samples it reads and
/// how many steps it takes), and their collectives would hang or pair up wrongly.
std::vector<std::pair<std::string, std::string>> options_every_rank_shares(const LoaderOptions& options) {
  static const std::set<std::string> this_ranks_own = {"prefetch", "copy-threads", "max-open-files", "io-thread",
                                                       "seed"};
  std::vector<std::pair<std::string, std::string>> named;
  for (const LoaderOption& option : loader_option_table())
    if (this_ranks_own.count(option.name) == 0) named.emplace_back("--" + option.name, option.get(options));
  named.emplace_back("LoaderOptions::split", options.split == LoaderSplit::exact ? "exact" : "sampler");
  named.emplace_back("LoaderOptions::max_steps_per_epoch", std::to_string(options.max_steps_per_epoch));
  named.emplace_back("LoaderOptions::plan_ahead", options.plan_ahead ? "true" : "false");
  return named;
}

constexpr const char* kSameOptionsAdvice = "every rank must be given the same options";

/// `depth` lowered so that its batches fit LoaderOptions::max_ring_bytes (an explicit depth is kept
/// or refused); UsageError when fewer batches fit than the consumer needs (one, or batches_held + 1).
int depth_within_ring_memory(int depth, const LoaderOptions& options, const DatasetInfo& info) {
  if (options.max_ring_bytes <= 0) return depth;
  const double batch_bytes = expected_batch_bytes(info, options.sampler.batch_size, options.sampler.max_tokens);
  const double limit = static_cast<double>(options.max_ring_bytes);
  const auto fitting = static_cast<std::int64_t>(batch_bytes > 0 ? std::floor(limit / batch_bytes) : depth);
  const std::string batch = std::to_string(static_cast<std::int64_t>(batch_bytes)) + " bytes";
  const std::string limit_text =
      "the ring memory limit of " + std::to_string(options.max_ring_bytes) + " bytes per rank";
  if (fitting < 1)
    STRIDER_THROW(UsageError, "a batch of " + batch + " does not fit " + limit_text +
                                  ": run fewer ranks per node or smaller batches");
  // A consumer that holds several batches needs one more in the ring for the I/O thread (prefetch_depth).
  const int least = options.batches_held > 1 ? options.batches_held + 1 : 1;
  if (fitting < least)
    STRIDER_THROW(UsageError, std::to_string(least) + " batches of " + batch + " (" +
                                  std::to_string(options.batches_held) + " held, 1 read ahead) exceed " + limit_text +
                                  " (" + std::to_string(fitting) + " fit)");
  if (options.prefetch > 0 && options.prefetch > fitting)
    STRIDER_THROW(UsageError, "--prefetch " + std::to_string(options.prefetch) + ": batches of " + batch + " exceed " +
                                  limit_text + " (" + std::to_string(fitting) + " fit)");
  return static_cast<int>(std::min<std::int64_t>(depth, fitting));
}

}  // namespace

struct Loader::State {
  explicit State(const Communicator& communicator) : comm(communicator) {}

  const Communicator& comm;
  LoaderOptions options;  // in force: seed and the sampler's dataset filled in
  bool seed_given = false;
  DatasetInfo info;
  std::string engine;
  int depth = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> opened_file_states;  // per shard
  int uncaught_at_construction = std::uncaught_exceptions();
  bool layout_agreed = false;  // every rank measured its thread layout, and all use the agreed one
  bool caller_thread = false;  // every rank reads on its consumer's thread (io_thread off, or agreed)
  bool spare_core = true;      // every rank has a core to spare beside its consumer's (has_spare_core)
  bool closed = false;
  PrefetchStats final_stats;
  // The in-memory store, when on: the prefetcher's reader (owned there), and what it holds.
  MemoryStore* store = nullptr;
  std::optional<StoreInfo> store_info;
  LayoutMeasurement final_layout;

  // The store after close() on this rank: its teardown is collective (no rank may still ask this one
  // for rows, and the node's ranks free its window together), so it waits for the Loader's
  // destruction, which every rank reaches, while close() stays local.
  std::unique_ptr<BatchReader> closed_store;

  // Declared before the samplers, destroyed after them: they borrow its reader's labels and lengths.
  std::unique_ptr<Prefetcher> prefetcher;
  // The plan read now, and the one planned ahead (null without plan_ahead). Each is planned for the
  // epoch beside it (none: not planned yet).
  std::unique_ptr<Sampler> current, upcoming;
  std::optional<std::int64_t> current_epoch, upcoming_epoch;
  std::future<void> planning;  // upcoming->set_epoch on another thread
  // Each epoch's order, or the bucketed sampler's whole plan, made once per node
  // (diagnostics.plan_per_node; null where not shared).
  struct NodeShares {
    std::shared_ptr<pipeline_detail::NodeOrder> order;
    std::shared_ptr<pipeline_detail::NodePlan> plan;
    /// Orders and plans this rank copied from its node's so far.
    std::int64_t copied() const { return (order ? order->counts().copied : 0) + (plan ? plan->counts().copied : 0); }
  };
  NodeShares node_shares;

  // The position: the epoch last started (or resumed) and the steps done in it.
  std::uint64_t epoch_id = 0;  // of the running LoaderEpoch
  bool running = false;        // an epoch is started and has not ended
  std::int64_t position_epoch = 0;
  std::int64_t first_step = 0;
  std::int64_t yielded = 0;
  std::optional<std::pair<std::int64_t, std::int64_t>> pending_resume;  // (epoch, step)

  std::unique_ptr<Sampler> make_plan() const {
    if (options.split == LoaderSplit::exact)
      return std::make_unique<ExactSplitSampler>(info.num_samples, options.sampler.batch_size, comm.size(),
                                                 comm.rank());
    return make_sampler(options.sampler, comm.size(), comm.rank());
  }
  /// The plan-ahead sampler: a copy of `planned` (planned for epoch 0 already; copying its plan
  /// costs a fraction of making it again), or a new one where the mode cannot copy itself.
  std::unique_ptr<Sampler> plan_ahead_of(const Sampler& planned) const {
    std::unique_ptr<Sampler> copy = planned.clone();
    return copy ? std::move(copy) : make_plan();
  }

  /// sampler->set_epoch(epoch) on any thread; with an observer (diagnostics), its CPU time and
  /// whether the order or plan was copied from the node's are sent as a plan event (a failed
  /// plan's too). Plans are made one at a time (the queries and the next epoch wait for a plan made
  /// ahead), so the node's counts of copies move only with this one.
  static void plan_epoch(Sampler& sampler, std::int64_t epoch, PrefetchObserver* observer,
                         const NodeShares& node_shares) {
    if (observer == nullptr) {
      sampler.set_epoch(epoch);
      return;
    }
    const double start = pipeline_detail::ThreadUsage::cpu_seconds_now();
    const std::int64_t copied_before = node_shares.copied();
    const auto send = [&] {
      const std::int64_t copied = node_shares.copied() - copied_before;
      observer->on_plan(PrefetchPlanEvent{epoch, pipeline_detail::ThreadUsage::cpu_seconds_now() - start, copied});
    };
    try {
      sampler.set_epoch(epoch);
    } catch (...) {
      send();
      throw;
    }
    send();
  }
  void plan_epoch(Sampler& sampler, std::int64_t epoch) const {
    plan_epoch(sampler, epoch, options.diagnostics.observer.get(), node_shares);
  }

  /// Waits for the plan made ahead; rethrows its failure (then nothing is planned ahead).
  void wait_for_plan() {
    if (!planning.valid()) return;
    try {
      planning.get();
    } catch (...) {
      upcoming_epoch.reset();
      throw;
    }
  }
  void wait_for_plan_quietly() noexcept {
    try {
      wait_for_plan();
    } catch (...) {
    }
  }

  /// Ends the running epoch. Also when none is marked running: an epoch() that failed on another
  /// rank may have started the prefetcher here.
  void stop_running() noexcept {
    if (prefetcher) prefetcher->stop();
    running = false;
  }

  /// A sampler planned for `epoch`, for const queries (steps, states): the current plan or the one
  /// made ahead when either is for that epoch; else an idle one planned for it now (the plan-ahead
  /// sampler, or the current one when no epoch reads it); else a new one, returned owned.
  std::pair<Sampler*, std::unique_ptr<Sampler>> planned_for(std::int64_t epoch) {
    if (current_epoch == epoch) return {current.get(), nullptr};
    wait_for_plan();
    if (upcoming_epoch == epoch) return {upcoming.get(), nullptr};
    // Planned for a query of this rank alone (steps, state: not collective): no other rank plans
    // this epoch now, so the node's order is neither waited for nor written.
    const pipeline_detail::NodeOrder::OnThisRankOnly alone;
    Sampler* idle = upcoming ? upcoming.get() : running ? nullptr : current.get();
    if (idle == nullptr) {
      std::unique_ptr<Sampler> plan = make_plan();
      plan_epoch(*plan, epoch);
      return {plan.get(), std::move(plan)};
    }
    std::optional<std::int64_t>& planned = idle == current.get() ? current_epoch : upcoming_epoch;
    planned.reset();
    plan_epoch(*idle, epoch);
    planned = epoch;
    return {idle, nullptr};
  }

  /// Makes `current` the plan of `epoch` (no epoch is running).
  void plan_current(std::int64_t epoch) {
    wait_for_plan();
    if (current_epoch != epoch && upcoming_epoch == epoch) {
      std::swap(current, upcoming);
      std::swap(current_epoch, upcoming_epoch);
    }
    if (current_epoch != epoch) {
      current_epoch.reset();
      plan_epoch(*current, epoch);
      current_epoch = epoch;
    }
  }

  /// Whether the next epoch is planned ahead (pipeline_detail::plans_ahead; with plan_ahead).
  bool plans_ahead() const {
    return pipeline_detail::plans_ahead(caller_thread, spare_core, node_shares.order != nullptr);
  }

  /// Plans `epoch` into `upcoming` on another thread.
  void plan_ahead(std::int64_t epoch) {
    if (!upcoming || upcoming_epoch == epoch) return;
    upcoming_epoch = epoch;  // valid once `planning` completed without error
    Sampler* sampler = upcoming.get();
    try {
      planning = std::async(std::launch::async, [sampler, epoch, observer = options.diagnostics.observer,
                                                 shares = node_shares, idle = options.plan_on_idle_cores] {
        if (idle) plan_on_idle_cores();
        plan_epoch(*sampler, epoch, observer.get(), shares);
      });
    } catch (...) {  // no thread to spare: the epoch is planned when it starts
      upcoming_epoch.reset();
    }
  }

  std::int64_t clip(std::int64_t steps) const {
    return options.max_steps_per_epoch > 0 ? std::min(steps, options.max_steps_per_epoch) : steps;
  }

  void check_open() const {
    if (closed) STRIDER_THROW(UsageError, "the loader is closed");
  }

  /// Gives the store kept since close() up without its collective teardown (MemoryStore::abandon):
  /// it is left to the end of the process. For a rank that may be alone here (an error unwinding).
  void abandon_closed_store() noexcept {
    if (!closed_store) return;
    if (auto* kept = dynamic_cast<MemoryStore*>(closed_store.get())) kept->abandon();
    keep_open_until_exit(std::move(closed_store));
  }

  /// Ends the epoch and the planning, marks the Loader closed and hands the reader out of the
  /// prefetcher, whose ring stays for the batches still held (freed with the Loader).
  std::unique_ptr<BatchReader> close_except_ring() noexcept {
    stop_running();
    wait_for_plan_quietly();
    current.reset();
    upcoming.reset();
    final_stats = prefetcher->stats();
    store = nullptr;  // owned by the prefetcher as its reader
    final_layout = prefetcher->layout();
    options.sampler.labels = nullptr;  // they point into the reader
    options.sampler.lengths = nullptr;
    options.sampler.class_index = nullptr;
    closed = true;
    return prefetcher->release_reader();
  }

  /// New samplers for changed options (seed, class weights); the position is kept.
  void rebuild_samplers() {
    stop_running();
    wait_for_plan_quietly();
    std::unique_ptr<Sampler> fresh = make_plan();
    std::unique_ptr<Sampler> ahead = options.plan_ahead ? plan_ahead_of(*fresh) : nullptr;
    current = std::move(fresh);
    upcoming = std::move(ahead);
    current_epoch = 0;  // made planned for epoch 0
    upcoming_epoch.reset();
  }
};

// ---- LoaderEpoch -----------------------------------------------------------------------------

LoaderEpoch::LoaderEpoch(LoaderEpoch&& other) noexcept {
  *this = std::move(other);
}

LoaderEpoch& LoaderEpoch::operator=(LoaderEpoch&& other) noexcept {
  if (this != &other) {
    if (loader_ != nullptr) loader_->end_epoch(id_);
    loader_ = std::exchange(other.loader_, nullptr);
    id_ = other.id_;
    epoch_ = other.epoch_;
    first_step_ = other.first_step_;
    end_step_ = other.end_step_;
  }
  return *this;
}

LoaderEpoch::~LoaderEpoch() {
  if (loader_ != nullptr) loader_->end_epoch(id_);
}

std::optional<Batch> LoaderEpoch::next(const std::function<void()>& between_waits) {
  if (loader_ == nullptr) return std::nullopt;
  return loader_->next_batch(id_, between_waits);
}

// ---- Loader ----------------------------------------------------------------------------------

Loader::Loader(const Communicator& comm, LoaderOptions options) : state_(std::make_unique<State>(comm)) {
  State& s = *state_;
  comm.arrive_together("the Loader's construction");  // warns when some ranks do not come
  comm.collective_try([&] { check_options(options); });
  comm.require_same_values(options_every_rank_shares(options), kSameOptionsAdvice);
  s.seed_given = options.seed.has_value();
  // The exact split has no order to seed: nothing to draw (or log) unless a seed was given.
  if (options.split == LoaderSplit::exact && !options.seed) options.seed = 0;
  options.seed = agree_on_seed(comm, options.seed);
  options.sampler.seed = *options.seed;

  ReaderOptions reader_options = options.reader;
  const bool plan_needs_labels = options.split == LoaderSplit::sampler && sampler_needs_labels(options.sampler.mode);
  if (plan_needs_labels) {
    reader_options.require_labels = true;  // refused at open, naming the sampler, not after it
    reader_options.labels_needed_by = "the " + options.sampler.mode + " sampler";
  }
  reader_options.labels_in_memory = options.labels_in_memory.value_or(plan_needs_labels);
  // The store reads the file once, in order: preads rather than page faults where auto may choose.
  if (options.store.mode == "memory") reader_options.auto_raw_engine = "direct";
  std::unique_ptr<BatchReader> reader = open_reader(comm, options.data_path, reader_options);
  s.opened_file_states = shard_states(reader->info());  // before a store's load reads the files
  if (options.store.mode == "memory") {
    std::unique_ptr<MemoryStore> store = MemoryStore::load(comm, std::move(reader), options.store);
    s.store = store.get();
    s.store_info = store->store_info();
    reader = std::move(store);
  }
  s.info = reader->info();
  s.engine = reader->engine();
  // The sampler takes labels and lengths straight from the reader, before the prefetcher owns it.
  options.sampler.dataset_size = s.info.num_samples;
  options.sampler.labels = reader->labels();  // views the reader keeps alive: it outlives the samplers
  if (s.info.variable_length) options.sampler.lengths = reader->lengths();
  s.depth = strider::prefetch_depth(options.prefetch, s.info, options.sampler.batch_size, options.sampler.max_tokens,
                                    options.batches_held);
  s.options = std::move(options);
  // An agreed failure here destroys the reader on every rank (a collective close for the store).
  comm.collective_try([&] { s.depth = depth_within_ring_memory(s.depth, s.options, s.info); });
  // Each epoch's order (distributed) or whole plan (bucketed), or the class-aware modes' class
  // index, once per node. The segments are made collectively: after the agreed checks above, and
  // on every rank or none (agreed here, whatever options a rank was given: 3 shares the class
  // index, 2 plans, 1 orders, the least wins).
  const bool per_node = s.options.diagnostics.plan_per_node && s.options.split == LoaderSplit::sampler;
  const bool class_aware = s.options.split == LoaderSplit::sampler && sampler_needs_labels(s.options.sampler.mode);
  const int share = !per_node                                                              ? 0
                    : class_aware                                                          ? 3
                    : s.options.sampler.mode == "bucketed"                                 ? 2
                    : s.options.sampler.mode == "distributed" && s.options.sampler.shuffle ? 1
                                                                                           : 0;
  const int shared = comm.all_reduce(share, ReduceOp::min);
  if (shared == 1)
    s.options.sampler.shared_order = s.node_shares.order =
        comm.collective_try([&] { return pipeline_detail::NodeOrder::create(comm, s.info.num_samples); });
  if (shared == 3) {
    const SharedView<std::int32_t>& labels = s.options.sampler.labels;
    const int classes = comm.collective_try([&] { return ClassIndex::classes_of(labels); });
    s.options.sampler.class_index =
        comm.collective_try([&] { return pipeline_detail::node_class_index(comm, labels, classes); });
  }
  comm.collective_try([&] {
    // One class index for both samplers (the current and the planned-ahead one), where the node
    // does not hold one.
    if (class_aware && !s.options.sampler.class_index)
      s.options.sampler.class_index = std::make_shared<const ClassIndex>(s.options.sampler.labels);
    s.current = s.make_plan();
    s.current_epoch = 0;  // a sampler is made planned for epoch 0: not planned again for it
  });
  if (shared == 2) {
    // Sized by epoch 0's plan, which every rank made alike: twice its batches (epochs differ by a
    // few), at most one per sample. A later plan that does not fit is made by every rank.
    auto* bucketed = dynamic_cast<BucketedSampler*>(s.current.get());
    const std::int64_t n = s.info.num_samples;
    // The least over the ranks: every rank maps the same size (options that differ between ranks
    // are refused below, after this collective).
    const std::int64_t bytes = comm.all_reduce(
        bucketed ? bucketed->shared_plan_bytes(std::min(n, 2 * bucketed->num_batches() + 64)) : 0, ReduceOp::min);
    s.node_shares.plan = comm.collective_try([&] { return pipeline_detail::NodePlan::create(comm, bytes); });
    if (bucketed) bucketed->share_plans(s.node_shares.plan);
    s.options.sampler.shared_plan = s.node_shares.plan;
  }
  comm.collective_try([&] {
    if (s.options.plan_ahead) s.upcoming = s.plan_ahead_of(*s.current);
  });
  // What the options above do not show: weights given as values (LoaderOptions::sampler).
  comm.require_same_values({{"the sampler's configuration (its mode's settings and weights), hashed",
                             std::to_string(s.current->config_hash())}},
                           kSameOptionsAdvice);
  PrefetcherOptions prefetcher_options;
  prefetcher_options.depth = s.depth;
  prefetcher_options.allocator = s.options.allocator;
  prefetcher_options.io_thread = s.options.io_thread;
  prefetcher_options.measure_layout = s.options.measure_thread_layout;
  prefetcher_options.spare_core = pipeline_detail::has_spare_core(comm.local_size());
  // The plan-ahead rule's inputs, the same on every rank (a rank that plans ahead while the node's
  // others plan at the epoch's start would wait for a plan nobody makes yet): a spare core where
  // every rank has one, the consumer's thread where every rank reads there.
  std::int64_t rule[2] = {prefetcher_options.spare_core ? 1 : 0, s.options.io_thread ? 0 : 1};
  comm.all_reduce(rule, 2, ReduceOp::min);
  s.spare_core = rule[0] == 1;
  s.caller_thread = rule[1] == 1;
  prefetcher_options.read_rows_one_by_one = s.options.diagnostics.read_rows_one_by_one;
  prefetcher_options.observer = s.options.diagnostics.observer;
  if (s.options.lookahead > 0) {
    // Merged reads pay where a row costs a whole chunk (chunked data through HDF5), and where rows
    // come from other nodes (the store, partitioned): one request per owner node per window of
    // steps instead of per batch, fetched while the previous window is delivered.
    const bool remote_rows = s.store != nullptr && s.store_info->nodes > 1 && s.store_info->layout == "partition";
    const char* why_not = remote_rows                  ? nullptr
                          : s.store                    ? "the store holds every row on this node"
                          : s.engine != "hdf5"         ? "the engine reads rows, not chunks"
                          : s.info.layout != "chunked" ? "the data is not chunked"
                                                       : nullptr;
    if (why_not == nullptr) {
      prefetcher_options.lookahead_steps = s.options.lookahead;
    } else if (comm.is_root()) {
      log_info("--lookahead ", s.options.lookahead, " does nothing here: ", why_not);
    }
  }
  s.prefetcher = std::make_unique<Prefetcher>(std::move(reader), prefetcher_options);
}

Loader::~Loader() {
  if (!state_) return;
  const bool unwinding = std::uncaught_exceptions() > state_->uncaught_at_construction;
  if (state_->closed) {
    // The State frees the ring, and the store kept since close() (collective), unless this rank
    // unwinds alone.
    if (unwinding) state_->abandon_closed_store();
    return;
  }
  if (unwinding) {
    abandon();
    return;
  }
  State& s = *state_;
  s.stop_running();
  s.wait_for_plan_quietly();
  s.current.reset();
  s.upcoming.reset();
  s.prefetcher.reset();  // with the reader: the store's close is collective
}

LoaderEpoch Loader::epoch(std::int64_t epoch) {
  State& s = *state_;
  s.check_open();
  s.stop_running();
  // Every rank comes within milliseconds, and a late wake-up here delays its reads: wait awake.
  const detail::YieldingWaits yielding(detail::kCollectiveYieldUs);
  s.comm.arrive_together("Loader::epoch");  // warns when some ranks do not come
  std::int64_t first = 0;
  s.comm.collective_try([&] {
    if (epoch < 0) STRIDER_THROW(UsageError, "epoch must be >= 0, got " + std::to_string(epoch));
    s.plan_current(epoch);
  });
  const std::int64_t steps = s.current->num_steps();
  if (s.pending_resume && s.pending_resume->first == epoch) first = s.pending_resume->second;
  first = std::min(first, s.clip(steps));
  // With the epoch, step counts and first step, whether every rank has ended its thread layout
  // measurement, and whether any decided (an epoch too short to time leaves a rank undecided, on
  // the I/O thread).
  const LayoutMeasurement layout = s.prefetcher->layout();
  std::int64_t bounds[8] = {epoch, -epoch, steps, -steps, layout.measuring ? 0 : 1, layout.decided ? -1 : 0,
                            first, -first};
  s.comm.all_reduce(bounds, 8, ReduceOp::min);
  if (bounds[4] == 1 && bounds[5] == -1 && !s.layout_agreed) {  // one layout for all, from now on
    s.layout_agreed = true;
    const pipeline_detail::AgreedLayout agreed = pipeline_detail::agree_thread_layout(s.comm, layout);
    s.prefetcher->use_layout(agreed.caller_thread);
    s.caller_thread = agreed.caller_thread;
    s.spare_core = agreed.spare_core;
    if (s.comm.is_root())
      log_info("thread layout: ",
               agreed.caller_thread ? "every rank reads on its consumer's thread"
                                    : "every rank reads ahead on an I/O thread",
               " (per step, the slowest rank's: ", agreed.io_thread_us_per_step, " us with an I/O thread, ",
               agreed.caller_thread_us_per_step, " us on the consumer's thread; ",
               agreed.spare_core ? "a core to spare for each I/O thread: a tie goes to the I/O thread)"
                                 : "no core to spare for an I/O thread: a tie goes to the consumer's thread)",
               s.options.plan_ahead && !s.plans_ahead() ? "; each epoch is planned when it starts" : "");
  }
  s.comm.collective_try([&] {
    if (s.options.check_data_unchanged) {
      const auto states = shard_states(s.info);
      for (std::size_t shard = 0; shard < states.size(); ++shard)
        if (states[shard] != s.opened_file_states[shard])
          STRIDER_THROW(DataError, s.info.shards[shard].path +
                                       " changed during training (its size or modification time differs from "
                                       "when it was opened); refusing to train on data that no longer matches");
    }
    if (bounds[0] != -bounds[1])
      STRIDER_THROW(UsageError, "the ranks asked for different epochs (" + std::to_string(bounds[0]) + " to " +
                                    std::to_string(-bounds[1]) + "): Loader::epoch is collective");
    if (s.options.split == LoaderSplit::sampler && bounds[2] != -bounds[3])
      STRIDER_THROW(Error, "ranks disagree on the number of steps in epoch " + std::to_string(epoch) +
                               " (a sampler bug): collectives would hang");
    if (s.options.split == LoaderSplit::sampler && bounds[6] != -bounds[7])
      STRIDER_THROW(UsageError, "the ranks start epoch " + std::to_string(epoch) + " at different steps (" +
                                    std::to_string(bounds[6]) + " to " + std::to_string(-bounds[7]) +
                                    "): every rank must load the same state (load_state is per rank)");
    s.prefetcher->start_epoch(*s.current, first, s.clip(steps));
  });
  s.pending_resume.reset();
  s.running = true;
  s.position_epoch = epoch;
  s.first_step = first;
  s.yielded = 0;
  if ((s.options.epochs == 0 || epoch + 1 < s.options.epochs) && s.plans_ahead()) s.plan_ahead(epoch + 1);
  return LoaderEpoch(this, ++s.epoch_id, epoch, first, s.clip(steps));
}

std::optional<Batch> Loader::next_batch(std::uint64_t id, const std::function<void()>& between_waits) {
  State& s = *state_;
  s.check_open();
  if (id != s.epoch_id)
    STRIDER_THROW(UsageError, "this epoch was replaced by a later Loader::epoch() or resume() call");
  if (!s.running) return std::nullopt;
  std::optional<Batch> batch;
  try {
    batch = s.prefetcher->next(between_waits);
  } catch (...) {
    s.running = false;
    throw;
  }
  if (!batch) {
    s.running = false;
    return std::nullopt;
  }
  ++s.yielded;
  return batch;
}

void Loader::end_epoch(std::uint64_t id) noexcept {
  if (state_ && !state_->closed && id == state_->epoch_id) state_->stop_running();
}

std::int64_t Loader::resume(const SamplerState& saved) {
  State& s = *state_;
  s.check_open();
  s.stop_running();
  ++s.epoch_id;  // an epoch started before no longer delivers
  s.wait_for_plan_quietly();
  const std::int64_t seed = *s.options.seed;
  const auto use_seed = [&s](std::int64_t value) {
    s.options.seed = value;
    s.options.sampler.seed = value;
    s.rebuild_samplers();
  };
  if (!s.seed_given && saved.seed != seed) use_seed(saved.seed);  // an agreed seed gives way to the state's
  s.current_epoch.reset();
  std::int64_t step = 0;
  try {
    step = s.current->resume(saved);  // checks mode, configuration and global batch
  } catch (...) {
    if (*s.options.seed != seed) use_seed(seed);
    throw;
  }
  s.current_epoch = saved.epoch;
  s.pending_resume = std::make_pair(saved.epoch, step);
  s.position_epoch = saved.epoch;
  s.first_step = step;
  s.yielded = 0;
  return step;
}

SamplerState Loader::state() {
  State& s = *state_;
  return state_after(s.first_step + s.yielded);
}

SamplerState Loader::state_after(std::int64_t steps_done) {
  State& s = *state_;
  s.check_open();
  auto [sampler, owned] = s.planned_for(s.position_epoch);
  if (steps_done < 0 || steps_done > sampler->num_steps())
    STRIDER_THROW(UsageError, "no state after " + std::to_string(steps_done) + " steps of an epoch of " +
                                  std::to_string(sampler->num_steps()));
  return sampler->state(steps_done);
}

std::int64_t Loader::steps(std::int64_t epoch) {
  State& s = *state_;
  s.check_open();
  if (epoch < 0) STRIDER_THROW(UsageError, "epoch must be >= 0, got " + std::to_string(epoch));
  auto [sampler, owned] = s.planned_for(epoch);
  return s.clip(sampler->num_steps());
}

const DatasetInfo& Loader::dataset() const noexcept {
  return state_->info;
}
const std::string& Loader::engine() const noexcept {
  return state_->engine;
}
std::int64_t Loader::seed() const noexcept {
  return *state_->options.seed;
}
int Loader::prefetch_depth() const noexcept {
  return state_->depth;
}
const LoaderOptions& Loader::options() const noexcept {
  return state_->options;
}

const StoreInfo* Loader::store() const noexcept {
  return state_->store_info ? &*state_->store_info : nullptr;
}

std::int64_t Loader::store_resident_bytes() const {
  return state_->store ? state_->store->resident_bytes() : -1;
}

PrefetchStats Loader::stats() const {
  return state_->closed ? state_->final_stats : state_->prefetcher->stats();
}

LayoutMeasurement Loader::thread_layout() const {
  return state_->closed ? state_->final_layout : state_->prefetcher->layout();
}

void Loader::reset_stats() {
  state_->check_open();
  state_->prefetcher->reset_stats();
}

SharedView<std::int32_t> Loader::labels() const {
  state_->check_open();
  return state_->prefetcher->labels();
}

SharedView<std::int64_t> Loader::lengths() const {
  state_->check_open();
  return state_->prefetcher->lengths();
}

void Loader::read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) {
  state_->check_open();
  state_->prefetcher->read_labels(first, count, out);
}

void Loader::set_class_weights(std::vector<double> weights) {
  State& s = *state_;
  s.check_open();
  if (s.options.split != LoaderSplit::sampler || s.options.sampler.mode != "weighted")
    STRIDER_THROW(UsageError, "class weights belong to the weighted sampler, not --sampler " + s.options.sampler.mode);
  LoaderOptions before = s.options;
  s.options.sampler.class_weights = std::move(weights);
  try {
    s.rebuild_samplers();
  } catch (...) {
    s.options = std::move(before);  // the old weights stay in force
    s.rebuild_samplers();
    throw;
  }
}

void Loader::close() {
  State& s = *state_;
  if (s.closed) return;
  const bool had_store = s.store != nullptr;
  std::unique_ptr<BatchReader> reader = s.close_except_ring();
  // The files close here, on this rank alone (every engine opens them with a local driver). The
  // store goes on answering the ranks still reading; its collective teardown waits for ~Loader.
  if (had_store) s.closed_store = std::move(reader);
}

void Loader::abandon() noexcept {
  State& s = *state_;
  if (s.closed) {
    s.abandon_closed_store();
    return;
  }
  // A store's remote fetch waits for other ranks, which may not come: give up at once. Its
  // destructor is then local, but its node memory is left to the process's end with the file.
  const bool had_store = s.store != nullptr;
  if (had_store) s.store->abandon();
  std::unique_ptr<BatchReader> reader = s.close_except_ring();
  if (s.engine != "hdf5" && !had_store) return;  // closed here, locally
  keep_open_until_exit(std::move(reader));
  try {
    log_debug("loader: ", s.options.data_path, " left open until the process ends");
  } catch (...) {
  }
}

bool Loader::closed() const noexcept {
  return state_->closed;
}

void Loader::require_steps(std::int64_t epoch) {
  if (steps(epoch) > 0) return;
  const LoaderOptions& options = state_->options;
  const std::string batch = options.sampler.mode == "bucketed" && options.sampler.max_tokens > 0
                                ? "batches of at most " + std::to_string(options.sampler.max_tokens) + " tokens"
                                : "batches of " + std::to_string(options.sampler.batch_size) + " per rank";
  STRIDER_THROW(UsageError, "epoch " + std::to_string(epoch) +
                                " has no step: " + std::to_string(state_->info.num_samples) + " samples, " +
                                std::to_string(state_->comm.size()) + " ranks, " + batch +
                                (options.sampler.drop_last_batch ? ", --drop-last-batch" : "") + " (sampler " +
                                options.sampler.mode + "): lower --batch-size");
}

}  // namespace strider
