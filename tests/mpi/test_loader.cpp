// strider::Loader at 1..4 ranks on real files: its batches are those of the hand-wired pipeline
// (a reader and a sampler built by hand, read directly), for every sampler mode, with plan-ahead on
// or off and with or without the I/O thread; resume, state, early exit, held batches, close and
// agreed errors. Every check is agreed across ranks before it is asserted.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "loader_test_support.hpp"
#include "pipeline/thread_layout.hpp"
#include "strider/comm/mpi_check.hpp"

using namespace strider;
using namespace strider::testing;

TEST_CASE("loader: every sampler mode gives the hand-wired pipeline's batches", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203), sequences(comm, "sequences", 301);
  int mismatches = 0;
  for (const ModeCase& mode : every_mode()) {
    const LoaderOptions options = options_for(mode, features, sequences);
    Loader loader(comm, options);
    for (std::int64_t epoch : {0, 1, 3}) {
      const std::vector<std::uint64_t> expected = expected_hashes(comm, options, epoch);
      if (loader_hashes(loader, epoch) != expected || expected.empty()) {
        ++mismatches;
        UNSCOPED_INFO("mismatch: " << mode.kind << " " << mode.mode << " epoch " << epoch);
      }
    }
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
}

TEST_CASE("loader: plan-ahead, caller-thread reads, per-row reads, depth and engine change nothing",
          "[mpi][loader][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203), sequences(comm, "sequences", 301);
  const std::vector<std::pair<std::string, std::function<void(LoaderOptions&)>>> variants = {
      {"default", [](LoaderOptions&) {}},
      {"no plan-ahead", [](LoaderOptions& o) { o.plan_ahead = false; }},
      {"caller thread", [](LoaderOptions& o) { o.io_thread = false; }},
      {"I/O thread, layout not measured", [](LoaderOptions& o) { o.measure_thread_layout = false; }},
      {"caller thread, per row",
       [](LoaderOptions& o) { o.io_thread = false, o.diagnostics.read_rows_one_by_one = true; }},
      {"per row", [](LoaderOptions& o) { o.diagnostics.read_rows_one_by_one = true; }},
      {"depth 1, hdf5", [](LoaderOptions& o) { o.prefetch = 1, o.reader.engine = "hdf5"; }},
      {"direct, 3 copy threads", [](LoaderOptions& o) { o.reader.engine = "direct", o.reader.copy_threads = 3; }},
      {"labels held", [](LoaderOptions& o) { o.labels_in_memory = true; }},
  };
  int mismatches = 0;
  for (const ModeCase& mode : {ModeCase{"features", "distributed", 9}, ModeCase{"sequences", "bucketed", 0}}) {
    const LoaderOptions base = options_for(mode, features, sequences);
    std::vector<std::vector<std::uint64_t>> expected;
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) expected.push_back(expected_hashes(comm, base, epoch));
    for (const auto& [name, change] : variants) {
      LoaderOptions options = base;
      change(options);
      Loader loader(comm, options);
      for (std::int64_t epoch = 0; epoch < 3; ++epoch)
        if (loader_hashes(loader, epoch) != expected[static_cast<std::size_t>(epoch)]) {
          ++mismatches;
          UNSCOPED_INFO("mismatch: " << mode.mode << ", " << name << ", epoch " << epoch);
        }
      // The layout measurement's tie rule follows this rank's cores (the node's ranks share them).
      if (loader.thread_layout().spare_core != pipeline_detail::has_spare_core(comm.local_size())) {
        ++mismatches;
        UNSCOPED_INFO("spare core: " << name);
      }
    }
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
}

#ifdef SCHED_IDLE
namespace {

/// Each plan event's epoch with the scheduling policy of the thread that planned it.
class PlanPolicies final : public PrefetchObserver {
 public:
  void on_plan(const PrefetchPlanEvent& event) noexcept override {
    const std::lock_guard<std::mutex> lock(mutex_);
    policies_.emplace_back(event.epoch, sched_getscheduler(0));
  }
  std::vector<std::pair<std::int64_t, int>> policies() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return policies_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::int64_t, int>> policies_;
};

/// The policy a new thread of this process has after asking for SCHED_IDLE: SCHED_IDLE, or its own
/// where the system refuses (a sandbox may), which the Loader accepts.
int idle_policy_granted() {
  int granted = -1;
  std::thread probe([&] {
    sched_param idle{};
    (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    granted = sched_getscheduler(0);
  });
  probe.join();
  return granted;
}

}  // namespace

TEST_CASE("loader: the next epoch is planned on idle cores only; the caller's thread keeps its priority",
          "[mpi][loader][plan]") {
  const Communicator& comm = world();
  const TestFile sequences(comm, "sequences", 301);
  const int caller_policy = sched_getscheduler(0);
  REQUIRE(caller_policy != SCHED_IDLE);
  const int idle_policy = idle_policy_granted();
  if (idle_policy != SCHED_IDLE) WARN("this system refuses SCHED_IDLE: plans ahead run at the caller's priority");
  bool as_expected = true;
  for (const bool on_idle_cores : {true, false}) {
    for (const std::string mode : {"distributed", "bucketed"}) {
      LoaderOptions options = options_for(sequences.path(), mode, 9);
      options.plan_on_idle_cores = on_idle_cores;
      // An I/O thread, not measured: epochs are planned ahead whatever the cores (see below).
      options.measure_thread_layout = false;
      const auto policies = std::make_shared<PlanPolicies>();
      options.diagnostics.observer = policies;
      Loader loader(comm, options);
      for (std::int64_t epoch : {0, 1, 5})  // 1 planned ahead during 0; 5 (not guessed) on this thread
        loader_hashes(loader, epoch);
      std::map<std::int64_t, int> by_epoch;
      for (const auto& [epoch, policy] : policies->policies()) by_epoch[epoch] = policy;
      // Epochs 1 and 2 were planned ahead (2 during 1; epoch 6's plan may still be running); 5 here.
      for (const std::int64_t epoch : {1, 2, 5}) {
        const auto found = by_epoch.find(epoch);
        const int expected = epoch != 5 && on_idle_cores ? idle_policy : caller_policy;
        if (found == by_epoch.end() || found->second != expected) {
          as_expected = false;
          UNSCOPED_INFO(mode << (on_idle_cores ? "" : ", at the caller's priority") << ", epoch " << epoch
                             << ": policy " << (found == by_epoch.end() ? -1 : found->second) << ", expected "
                             << expected);
        }
      }
      if (sched_getscheduler(0) != caller_policy) {
        as_expected = false;
        UNSCOPED_INFO(mode << ": the caller's thread changed its policy");
      }
    }
  }
  REQUIRE(everywhere(comm, as_expected));
}
#endif

namespace {

/// Each plan event's epoch, and whether the caller's thread (this one) planned it.
class PlanThreads final : public PrefetchObserver {
 public:
  void on_plan(const PrefetchPlanEvent& event) noexcept override {
    const std::lock_guard<std::mutex> lock(mutex_);
    on_caller_[event.epoch] = std::this_thread::get_id() == caller_;
  }
  /// Whether `epoch` was planned ahead (`ahead`), else on the caller's thread; `how` says which.
  bool planned(std::int64_t epoch, bool ahead, std::string& how) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = on_caller_.find(epoch);
    how = found == on_caller_.end() ? "not planned"
          : found->second           ? "planned on the caller's thread"
                                    : "planned ahead";
    return found != on_caller_.end() && found->second != ahead;
  }

 private:
  const std::thread::id caller_ = std::this_thread::get_id();
  mutable std::mutex mutex_;
  std::map<std::int64_t, bool> on_caller_;
};

}  // namespace

namespace {

/// Holds the calling thread, and the threads it starts, to one of the CPUs it may run on while
/// alive (the node-local rank's, counted among them): a rank without a core to spare on any machine.
class OneCpu {
 public:
  explicit OneCpu(int local_rank) {
    CPU_ZERO(&before_);
    if (sched_getaffinity(0, sizeof(before_), &before_) != 0) return;
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &before_)) cpus.push_back(cpu);
    if (cpus.empty()) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(local_rank) % cpus.size()], &one);
    held_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~OneCpu() {
    if (held_) sched_setaffinity(0, sizeof(before_), &before_);
  }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;
  bool held() const noexcept { return held_; }

 private:
  cpu_set_t before_;
  bool held_ = false;
};

}  // namespace

TEST_CASE("loader: reading on the consumer's thread without a spare core, epochs are planned when they start",
          "[mpi][loader][plan]") {
  // Except the distributed sampler's, whose node order one rank shuffles while the others wait;
  // epoch 2 is read twice, planned anew, with the same batches. Each rank as the machine gives it
  // (a spare core or not), then held to one CPU (none spare): both sides of the rule on any machine.
  const Communicator& comm = world();
  const TestFile sequences(comm, "sequences", 301);
  bool as_expected = true;
  for (const bool one_cpu : {false, true}) {
    std::optional<OneCpu> held;
    if (one_cpu) held.emplace(comm.local_rank());
    REQUIRE(everywhere(comm, !one_cpu || held->held()));
    const bool spare_core = everywhere(comm, pipeline_detail::has_spare_core(comm.local_size()));
    if (one_cpu) REQUIRE_FALSE(spare_core);
    for (const bool io_thread : {true, false}) {
      for (const std::string mode : {"distributed", "bucketed", "weighted"}) {
        LoaderOptions options = options_for(sequences.path(), mode, 9);
        options.io_thread = io_thread;
        options.measure_thread_layout = false;
        const auto threads = std::make_shared<PlanThreads>();
        options.diagnostics.observer = threads;
        Loader loader(comm, options);
        const std::vector<std::uint64_t> expected = loader_hashes(loader, 2);
        for (std::int64_t epoch : {0, 1, 2}) loader_hashes(loader, epoch);
        if (loader_hashes(loader, 2) != expected) {
          as_expected = false;
          UNSCOPED_INFO(mode << ": epoch 2 read twice differs");
        }
        // The distributed sampler's order is shuffled once per node where a node has several ranks.
        const bool node_order = mode == "distributed" && comm.local_size() > 1;
        const bool ahead = pipeline_detail::plans_ahead(!io_thread, spare_core, node_order);
        for (const std::int64_t epoch : {1, 2}) {  // planned during epoch 0 and 1, or when they started
          std::string how;
          if (!threads->planned(epoch, ahead, how)) {
            as_expected = false;
            UNSCOPED_INFO(mode << (io_thread ? ", I/O thread" : ", consumer's thread") << (one_cpu ? ", one CPU" : "")
                               << ", epoch " << epoch << ": " << how);
          }
        }
      }
    }
  }
  REQUIRE(everywhere(comm, as_expected));
}

TEST_CASE("loader: once the ranks agree on a thread layout, epochs are planned as it says", "[mpi][loader][plan]") {
  // Ahead, or when they start (reading on the consumer's thread without a spare core, as the
  // measurement may decide here): whichever layout the measurement keeps.
  const Communicator& comm = world();
  const TestFile sequences(comm, "sequences", 4000, "_layout");
  LoaderOptions options = options_for(sequences.path(), "distributed", 4);  // enough steps an epoch to measure
  options.sampler.shuffle = false;  // no node order, which one rank would shuffle for the others
  options.prefetch = 1;
  const auto threads = std::make_shared<PlanThreads>();
  options.diagnostics.observer = threads;
  Loader loader(comm, options);
  std::int64_t epoch = 0;
  // Until every rank has decided (ranks may decide in different epochs; epoch() is collective).
  for (; epoch < 6 && !everywhere(comm, loader.thread_layout().decided); ++epoch) loader_hashes(loader, epoch);
  REQUIRE(everywhere(comm, loader.thread_layout().decided));
  // The agreement is made at the next epoch's start; the epoch after that is planned by its rule.
  loader_hashes(loader, epoch);
  loader_hashes(loader, epoch + 1);
  const bool ahead =
      pipeline_detail::plans_ahead(loader.thread_layout().caller_thread,
                                   everywhere(comm, pipeline_detail::has_spare_core(comm.local_size())), false);
  std::string how;
  const bool as_expected = threads->planned(epoch + 1, ahead, how);
  if (!as_expected)
    UNSCOPED_INFO("epoch " << epoch + 1
                           << (loader.thread_layout().caller_thread ? ", consumer's thread: " : ", I/O thread: ")
                           << how);
  REQUIRE(everywhere(comm, as_expected));
}

TEST_CASE("loader: steps(e) follows the epoch's plan and state() counts the batches yielded", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile sequences(comm, "sequences", 301);
  const LoaderOptions options = options_for(sequences.path(), "bucketed", 0);
  Loader loader(comm, options);

  // Bucketed epochs differ in length: steps(e) is the plan's, epoch by epoch.
  std::set<std::int64_t> lengths;
  bool steps_ok = true;
  for (std::int64_t epoch : {9, 0, 1, 2, 3, 4, 5, 6, 7, 8}) {
    const auto expected = static_cast<std::int64_t>(expected_hashes(comm, options, epoch).size());
    steps_ok = steps_ok && loader.steps(epoch) == expected;
    lengths.insert(expected);
  }
  REQUIRE_ON_ALL_RANKS(lengths.size() > 1);  // the check above could tell epochs apart
  REQUIRE(everywhere(comm, steps_ok));

  // The state after k batches is the sampler's after k steps (built here by hand).
  ReaderOptions reader_options;
  std::unique_ptr<BatchReader> reader = open_reader(comm, options.data_path, reader_options);
  SamplerOptions sampling = options.sampler;
  sampling.seed = 1234;
  sampling.dataset_size = reader->info().num_samples;
  sampling.lengths = std::make_shared<const std::vector<std::int64_t>>(reader->lengths().to_vector());
  std::unique_ptr<Sampler> sampler = make_sampler(sampling, comm.size(), comm.rank());
  sampler->set_epoch(2);
  bool states_ok = loader.state().epoch == 0 && loader.state().consumed == 0;
  {
    LoaderEpoch epoch = loader.epoch(2);
    states_ok = states_ok && loader.state() == sampler->state(0);
    for (std::int64_t k = 1; k <= 3; ++k) {
      std::optional<Batch> batch = epoch.next();
      states_ok = states_ok && batch && batch->step() == k - 1 && loader.state() == sampler->state(k);
    }
    states_ok = states_ok && loader.state_after(1) == sampler->state(1);
  }
  REQUIRE(everywhere(comm, states_ok));

  // At most S steps per epoch.
  LoaderOptions limited = options;
  limited.max_steps_per_epoch = 2;
  sampler->set_epoch(1);
  Loader short_loader(comm, limited);
  REQUIRE(everywhere(comm, short_loader.steps(1) == 2 && loader_hashes(short_loader, 1).size() == 2 &&
                               short_loader.state() == sampler->state(2)));
}

TEST_CASE("loader: resume at a mid-epoch step yields the tail of the uninterrupted epoch", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203), sequences(comm, "sequences", 301);
  int mismatches = 0;
  for (const ModeCase& mode : every_mode()) {
    const LoaderOptions options = options_for(mode, features, sequences);
    const std::vector<std::uint64_t> full = expected_hashes(comm, options, 1);
    const auto k = static_cast<std::int64_t>(full.size() / 2);
    const SamplerState saved = state_after_leaving(comm, options, 1, k);
    // Resumed with the same explicit seed, and without one (the state's seed is taken).
    for (bool explicit_seed : {true, false}) {
      LoaderOptions resumed_options = options;
      if (!explicit_seed) resumed_options.seed.reset();
      Loader resumed(comm, resumed_options);
      const std::int64_t resume_step = resumed.resume(saved);
      LoaderEpoch epoch = resumed.epoch(1);
      std::vector<std::uint64_t> tail;
      while (std::optional<Batch> batch = epoch.next()) tail.push_back(strider::testing::batch_hash(*batch));
      if (resume_step != k || epoch.first_step() != k ||
          tail != std::vector<std::uint64_t>(full.begin() + k, full.end()) || resumed.seed() != 1234) {
        ++mismatches;
        UNSCOPED_INFO("resume mismatch: " << mode.kind << " " << mode.mode << (explicit_seed ? "" : ", agreed seed"));
      }
    }
    // Another explicit seed is another plan: refused, naming the seed.
    LoaderOptions other = options;
    other.seed = 99;
    Loader wrong(comm, other);
    std::string refusal;
    try {
      wrong.resume(saved);
    } catch (const UsageError& error) {
      refusal = error.reason();
    }
    if (refusal.find("seed 1234") == std::string::npos) ++mismatches;
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
}

TEST_CASE("loader: elastic resume at one rank keeps the global batches of R ranks", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 204, "_elastic");  // 1..4 ranks: no padding
  constexpr std::int64_t global_batch = 12;                    // divisible by 1, 2, 3 and 4 ranks
  int mismatches = 0;
  for (const std::string mode : {"distributed", "streaming", "weighted", "block"}) {
    LoaderOptions options = options_for(features.path(), mode, global_batch / comm.size());
    Loader loader(comm, options);
    LoaderEpoch epoch = loader.epoch(0);
    const std::int64_t steps = epoch.end_step(), k = steps / 2;
    std::vector<std::uint64_t> global;  // per step from k: the fingerprint of the union of every rank's batch
    SamplerState saved;
    while (std::optional<Batch> batch = epoch.next()) {
      if (batch->step() == k) saved = loader.state_after(k);
      if (batch->step() >= k) global.push_back(comm.all_reduce(index_fingerprint(batch->indices()), ReduceOp::sum));
    }
    int ok = 1;
    if (comm.is_root()) {  // the same file at world size 1, batch R*B, resumed from the R-rank state
      const Communicator alone = Communicator::duplicate(MPI_COMM_SELF);
      LoaderOptions single = options;
      single.sampler.batch_size = global_batch;
      Loader resumed(alone, single);
      if (mode == "block" && comm.size() > 1) {  // its plan depends on R: refused
        ok = refuses([&] { resumed.resume(saved); }) ? 1 : 0;
      } else {
        resumed.resume(saved);
        std::vector<std::uint64_t> tail;
        for (Batch batch : resumed.epoch(0)) tail.push_back(index_fingerprint(batch.indices()));
        ok = tail == global && static_cast<std::int64_t>(global.size()) == steps - k ? 1 : 0;
      }
      if (!ok) UNSCOPED_INFO("elastic mismatch: " << mode << " from " << comm.size() << " ranks");
    }
    mismatches += comm.all_reduce(1 - ok, ReduceOp::sum);
  }
  REQUIRE(mismatches == 0);
}

TEST_CASE("loader: a trainer holds batch k+1 while it uses batch k", "[mpi][loader][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 0);
  bool ok = true;
  for (bool io_thread : {true, false}) {
    options.io_thread = io_thread;
    options.prefetch = 2;
    Loader loader(comm, options);
    LoaderEpoch epoch = loader.epoch(0);
    std::optional<Batch> current = epoch.next(), upcoming;
    std::size_t step = 0;
    while (current) {
      upcoming = epoch.next();                                              // k+1 arrives while k is still held ...
      ok = ok && strider::testing::batch_hash(*current) == expected[step];  // ... and k is intact
      current = std::move(upcoming);
      ++step;
    }
    ok = ok && step == expected.size();
    // Holding every buffer and asking for more is a usage error, not a wait.
    options.prefetch = 1;
    Loader one(comm, options);
    LoaderEpoch single = one.epoch(0);
    std::optional<Batch> held = single.next();
    ok = ok && refuses([&] { single.next(); });
  }
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("loader: a caller that holds two batches gets a ring of three and takes a third", "[mpi][loader]") {
  // A trainer that stages batch k+1 on a device holds k and k+1 while it asks for k+2 (after
  // releasing k). With batches_held = 2 the ring is at least three deep, --prefetch 2 included.
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 0);
  options.prefetch = 2;
  options.batches_held = 2;
  Loader loader(comm, options);
  bool ok = loader.prefetch_depth() == 3;
  LoaderEpoch epoch = loader.epoch(0);
  std::optional<Batch> current = epoch.next(), staged = epoch.next();
  std::size_t step = 0;
  while (current) {
    ok = ok && strider::testing::batch_hash(*current) == expected[step];
    current.reset();
    std::optional<Batch> after = staged ? epoch.next() : std::nullopt;  // two held: staged and this one
    current = std::move(staged);
    staged = std::move(after);
    ++step;
  }
  ok = ok && step == expected.size();
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("loader: leaving an epoch early, then the next epoch", "[mpi][loader][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const LoaderOptions options = options_for(features.path(), "distributed", 5);
  const std::vector<std::uint64_t> epoch0 = expected_hashes(comm, options, 0),
                                   epoch1 = expected_hashes(comm, options, 1);
  Loader loader(comm, options);
  bool ok = true;
  std::optional<Batch> kept;
  for (Batch batch : loader.epoch(0)) {
    if (batch.step() == 2) {
      kept = std::move(batch);  // the caller's until it drops it, also after the loop
      break;
    }
  }
  ok = ok && loader.state().consumed == 3 * 5 * comm.size();
  try {
    for (Batch batch : loader.epoch(0))
      if (batch.step() == 1) throw std::runtime_error("the step failed");
    ok = false;
  } catch (const std::runtime_error&) {
  }
  ok = ok && loader_hashes(loader, 1) == epoch1;
  ok = ok && kept && strider::testing::batch_hash(*kept) == epoch0[2];
  kept.reset();
  ok = ok && loader_hashes(loader, 0) == epoch0;
  // An epoch replaced by a later epoch() delivers no more.
  LoaderEpoch old = loader.epoch(0);
  LoaderEpoch current = loader.epoch(1);
  ok = ok && refuses([&] { old.next(); });
  ok = ok && current.next()->step() == 0;
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("loader: class weights changed between epochs take effect at the next one", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  LoaderOptions options = options_for(features.path(), "weighted", 6);
  Loader loader(comm, options);
  bool ok = loader_hashes(loader, 0) == expected_hashes(comm, options, 0);
  options.sampler.class_weights = {5.0, 1.0, 0.5};
  std::uint64_t config_hash = 0;
  const std::vector<std::uint64_t> reweighted = expected_hashes(comm, options, 1, &config_hash);
  loader.set_class_weights(options.sampler.class_weights);
  ok = ok && loader_hashes(loader, 1) == reweighted && loader.state().config_hash == config_hash;
  // Invalid weights are refused and the last valid ones stay.
  ok = ok && refuses([&] { loader.set_class_weights({-1.0, 1.0, 1.0}); });
  ok = ok && loader_hashes(loader, 2) == expected_hashes(comm, options, 2);
  Loader distributed(comm, options_for(features.path(), "distributed", 6));
  ok = ok && refuses([&] { distributed.set_class_weights({1.0, 2.0, 3.0}); });
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("loader: the exact split reads every sample once, without padding", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  LoaderOptions options = options_for(features.path(), "balanced", 10);  // the mode is ignored
  options.split = LoaderSplit::exact;
  Loader loader(comm, options);
  std::vector<std::int32_t> seen(203, 0);
  std::int64_t batches = 0;
  for (Batch batch : loader.epoch(0)) {
    ++batches;
    for (std::int64_t index : batch.indices()) ++seen[static_cast<std::size_t>(index)];
  }
  comm.all_reduce(seen.data(), static_cast<std::int64_t>(seen.size()), ReduceOp::sum);
  // Rank r holds ceil((203 - r) / R) samples in batches of 10.
  const std::int64_t mine = (203 - comm.rank() + comm.size() - 1) / comm.size();
  // Without a seed there is nothing to draw: the exact split has no order.
  options.seed.reset();
  const bool ok = std::all_of(seen.begin(), seen.end(), [](std::int32_t count) { return count == 1; }) &&
                  batches == (mine + 9) / 10 && loader.steps(0) == batches && Loader(comm, options).seed() == 0;
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("loader: labels are held only when the plan needs them, and read between epochs", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  ReaderOptions reader_options;
  const std::vector<std::int32_t> all = open_reader(comm, features.path(), reader_options)->labels().to_vector();
  Loader distributed(comm, options_for(features.path(), "distributed", 8));
  Loader balanced(comm, options_for(features.path(), "balanced", 8));
  LoaderOptions held = options_for(features.path(), "streaming", 8);
  held.labels_in_memory = true;
  Loader streaming(comm, held);
  bool ok = distributed.labels().empty() && distributed.dataset().labels_per_batch &&
            balanced.labels().to_vector() == all && streaming.labels().to_vector() == all;
  std::vector<std::int32_t> range(50);
  distributed.read_labels(100, 50, range.data());
  ok = ok && std::equal(range.begin(), range.end(), all.begin() + 100);
  {
    LoaderEpoch running = distributed.epoch(0);
    ok = ok && refuses([&] { distributed.read_labels(0, 1, range.data()); });  // not while an epoch reads
  }
  distributed.read_labels(0, 50, range.data());  // the epoch was left
  ok = ok && std::equal(range.begin(), range.end(), all.begin());
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("loader: close() is final; unwinding never closes collectively", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203, "_close");
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  options.reader.engine = "hdf5";  // HDF5 is left to close its files at MPI_Finalize while unwinding
  bool ok = true;
  {
    Loader loader(comm, options);
    const auto batches = static_cast<std::int64_t>(loader_hashes(loader, 0).size());
    loader.close();
    loader.close();  // again: nothing
    ok = ok && loader.closed() && loader.stats().batches == batches && loader.dataset().num_samples == 203;
    ok = ok && refuses([&] { loader.epoch(1); }) && refuses([&] { loader.labels(); }) &&
         refuses([&] { loader.steps(0); });
  }
  // An error agreed inside a step unwinds every rank's Loader: none blocks in a close.
  const int unwound = ranks_agreeing(
      comm,
      [&] {
        Loader loader(comm, options);
        LoaderEpoch epoch = loader.epoch(0);
        std::optional<Batch> batch = epoch.next();
        comm.collective_try([&] {
          if (comm.rank() == comm.size() - 1) throw std::runtime_error("a step failed on the last rank");
        });
      },
      "a step failed on the last rank");
  // A failure on one rank alone: its Loader unwinds while the other ranks wait in a barrier, so a
  // collective close there would never return.
  int caught = 0;
  try {
    Loader loader(comm, options);
    if (comm.rank() != comm.size() - 1) comm.barrier();
    throw std::runtime_error("a local failure");
  } catch (const std::runtime_error&) {
    caught = 1;
  }
  if (comm.rank() == comm.size() - 1) comm.barrier();
  REQUIRE(everywhere(comm, ok));
  REQUIRE(unwound == comm.size());
  REQUIRE(comm.all_reduce(caught, ReduceOp::sum) == comm.size());
}

TEST_CASE("loader: batches held across close() or abandon() keep their bytes", "[mpi][loader]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203, "_held");
  bool ok = true;
  for (const bool abandon : {false, true}) {
    for (const std::string engine : {"hdf5", "mmap"}) {
      LoaderOptions options = options_for(features.path(), "distributed", 8);
      options.reader.engine = engine;
      options.prefetch = 4;
      Loader loader(comm, options);
      LoaderEpoch epoch = loader.epoch(0);
      std::optional<Batch> first = epoch.next();
      std::optional<Batch> second = epoch.next();
      const std::vector<std::byte> before(first->samples(), first->samples() + first->samples_bytes());
      const std::uint64_t second_hash = strider::testing::batch_hash(*second);
      if (!abandon) {
        loader.close();
      } else {
        // Not collective: the last rank leaves its loader while the others wait in a barrier.
        if (comm.rank() != comm.size() - 1) comm.barrier();
        loader.abandon();
        if (comm.rank() == comm.size() - 1) comm.barrier();
      }
      ok = ok && loader.closed();
      // Memory the ring freed would now be handed out again: take and scribble over blocks of the
      // ring's size, so that a batch pointing into freed buffers sees other bytes.
      std::vector<void*> scribbles;
      for (int k = 0; k < 2 * loader.prefetch_depth(); ++k) {
        void* block = std::aligned_alloc(4096, 4096);
        std::memset(block, 0xA5, 4096);
        scribbles.push_back(block);
      }
      ok = ok && std::equal(before.begin(), before.end(), first->samples(), first->samples() + first->samples_bytes());
      ok = ok && strider::testing::batch_hash(*second) == second_hash;
      ok = ok && refuses([&] { epoch.next(); });
      first.reset();
      second.reset();
      for (void* block : scribbles) std::free(block);
    }
  }
  REQUIRE(everywhere(comm, ok));
}

/// A barrier whose wait is bounded: start() posts an MPI_Ibarrier, arrived_by() polls it until a
/// deadline, finish() waits for it without a bound (after a rank that gave up has let the others go
/// on). For tests that must fail, not hang, when a rank is stuck in a call.
class BoundedBarrier {
 public:
  explicit BoundedBarrier(const Communicator& comm) {
    STRIDER_MPI_CHECK(MPI_Ibarrier(comm.native(), &request_), "a bounded barrier");
  }
  /// Whether every rank has arrived by `deadline` (always, after a wait, in a sanitizer build).
  bool arrived_by(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      int done = 0;
      STRIDER_MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "a bounded barrier");
      if (done) return true;
      if (!kSanitized && std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void finish() { STRIDER_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE), "a bounded barrier"); }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
};

TEST_CASE("loader: close() on one rank alone is local; the other ranks read on and every rank finishes",
          "[mpi][loader][store]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203, "_close_alone");
  const NodeSize node_size(1);  // the store: every rank a node, so most rows are another rank's
  for (const bool store : {false, true}) {
    LoaderOptions options = options_for(features.path(), "distributed", 8);
    options.reader.engine = "hdf5";
    if (store) options.store.mode = "memory";
    const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 0);
    // Bounded: a close() that waits for the other ranks fails this case after 20 s, then returns
    // once the others destroy their Loaders.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool ok = true, in_time = true;
    std::optional<BoundedBarrier> after;
    {
      Loader loader(comm, options);
      LoaderEpoch epoch = loader.epoch(0);
      if (comm.is_root()) {
        loader.close();  // rank 0 alone, in the middle of the epoch
        ok = loader.closed() && refuses([&] { epoch.next(); }) && loader.dataset().num_samples == 203;
      } else {
        // The others read the whole epoch on (with the store, from rank 0's node too).
        std::vector<std::uint64_t> hashes;
        while (std::optional<Batch> batch = epoch.next()) hashes.push_back(batch_hash(*batch));
        ok = hashes == expected;
      }
      after.emplace(comm);
      in_time = after->arrived_by(deadline);
    }  // every rank destroys its Loader (the store's collective teardown)
    after->finish();
    CAPTURE(store);
    REQUIRE_ON_ALL_RANKS(ok);
    REQUIRE_ON_ALL_RANKS(in_time);
  }
}

TEST_CASE("loader: bad options and bad calls fail on every rank with the same error", "[mpi][loader][errors]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const LoaderOptions good = options_for(features.path(), "distributed", 8);
  std::vector<std::pair<std::string, std::function<void(LoaderOptions&)>>> bad = {
      {"missing.h5", [](LoaderOptions& o) { o.data_path = "/nonexistent/missing.h5"; }},
      {"--prefetch must be in 0..64 (0: auto), got 65", [](LoaderOptions& o) { o.prefetch = 65; }},
      {"--batch-size must be >= 0, got -1", [](LoaderOptions& o) { o.sampler.batch_size = -1; }},
      {"LoaderOptions::batches_held must be in 1..63, got 0", [](LoaderOptions& o) { o.batches_held = 0; }},
      {"unknown sampler 'shuffled'", [](LoaderOptions& o) { o.sampler.mode = "shuffled"; }},
      {"balanced", [](LoaderOptions& o) { o.sampler.mode = "balanced", o.reader.keys.labels = "/none"; }},
      {"engine", [](LoaderOptions& o) { o.reader.engine = "fast"; }},
      // One rank alone has a bad option: still every rank fails.
      {"--prefetch must be in 0..64 (0: auto), got 99",
       [&comm](LoaderOptions& o) { o.prefetch = comm.rank() == comm.size() - 1 ? 99 : 0; }},
      {"--batch-size must be at most 1099511627776", [](LoaderOptions& o) { o.sampler.batch_size = 1LL << 41; }},
  };
  // Options that must match across ranks, given differently on the last rank: every rank fails,
  // naming the option and both values (the resource options, such as the prefetch depth, may differ).
  const auto on_last_rank = [&comm](auto here, auto there) { return comm.rank() == comm.size() - 1 ? there : here; };
  const std::string last = std::to_string(comm.size() - 1);
  if (comm.size() > 1) {
    bad.push_back({"--batch-size is '9' on rank " + last + " but '8' on rank 0: every rank must be given the same",
                   [&](LoaderOptions& o) { o.sampler.batch_size = on_last_rank(8, 9); }});
    bad.push_back({"--no-shuffle is 'true' on rank " + last + " but 'false' on rank 0",
                   [&](LoaderOptions& o) { o.sampler.shuffle = on_last_rank(true, false); }});
    bad.push_back({"--sampler is 'streaming' on rank " + last, [&](LoaderOptions& o) {
                     o.sampler.mode = on_last_rank(std::string("distributed"), std::string("streaming"));
                   }});
    bad.push_back({"LoaderOptions::split is 'exact' on rank " + last,
                   [&](LoaderOptions& o) { o.split = on_last_rank(LoaderSplit::sampler, LoaderSplit::exact); }});
  }
  int failures = 0;
  for (const auto& [words, change] : bad) {
    LoaderOptions options = good;
    change(options);
    const int agreed = ranks_agreeing(
        comm, [&] { Loader loader(comm, options); }, words);
    if (agreed != comm.size()) {
      ++failures;
      UNSCOPED_INFO("not agreed on every rank: " << words);
    }
  }
  Loader loader(comm, good);
  if (ranks_agreeing(
          comm, [&] { loader.epoch(-1); }, "epoch must be >= 0") != comm.size())
    ++failures;
  if (comm.size() > 1 &&
      ranks_agreeing(
          comm, [&] { loader.epoch(comm.rank()); }, "the ranks asked for different epochs") != comm.size())
    ++failures;
  // Ranks that resume at different steps (load_state is per rank) would take different step counts.
  if (comm.size() > 1) {
    const SamplerState saved = loader.state_after(comm.rank() == 0 ? 1 : 2);
    loader.resume(saved);
    if (ranks_agreeing(
            comm, [&] { loader.epoch(saved.epoch); },
            "the ranks start epoch " + std::to_string(saved.epoch) + " at different steps (1 to 2)") != comm.size())
      ++failures;
  }
  // A resource option may differ: a deeper ring on one rank reads the same batches.
  LoaderOptions deeper = good;
  deeper.prefetch = comm.rank() == 0 ? 2 : 4;
  Loader mixed(comm, deeper);
  if (!everywhere(comm, mixed.steps(0) == loader.steps(0))) ++failures;
  REQUIRE(failures == 0);
}

TEST_CASE("loader: the ring's depth fits max_ring_bytes, or the Loader says what does not fit",
          "[mpi][loader][errors]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  // 8 rows of 6 float32: 192 bytes per batch. Without a limit the auto depth is 64 (16 MiB of
  // batches, at most 64); 500 bytes hold 2 batches.
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  {
    Loader unlimited(comm, options);
    REQUIRE(everywhere(comm, unlimited.prefetch_depth() == 64));
  }
  options.max_ring_bytes = 500;
  {
    Loader limited(comm, options);
    REQUIRE(everywhere(comm, limited.prefetch_depth() == 2));
    std::int64_t batches = 0;
    for (Batch batch : limited.epoch(0)) batches += batch.size() > 0 ? 1 : 0;
    REQUIRE(everywhere(comm, batches == limited.steps(0)));
  }
  options.prefetch = 2;  // an explicit depth that fits is kept
  {
    Loader explicit_depth(comm, options);
    REQUIRE(everywhere(comm, explicit_depth.prefetch_depth() == 2));
  }
  int failures = 0;
  options.prefetch = 3;
  if (ranks_agreeing(
          comm, [&] { Loader loader(comm, options); },
          "--prefetch 3: batches of 192 bytes exceed the ring memory limit of 500 bytes per rank (2 fit)") !=
      comm.size())
    ++failures;
  options.prefetch = 0;
  options.max_ring_bytes = 191;
  if (ranks_agreeing(
          comm, [&] { Loader loader(comm, options); },
          "a batch of 192 bytes does not fit the ring memory limit of 191 bytes per rank") != comm.size())
    ++failures;
  // A consumer holding 2 batches needs 3 in the ring: 500 bytes hold 2 of 192, 600 hold 3.
  options.max_ring_bytes = 500;
  options.batches_held = 2;
  if (ranks_agreeing(
          comm, [&] { Loader loader(comm, options); },
          "3 batches of 192 bytes (2 held, 1 read ahead) exceed the ring memory limit of 500 bytes per rank (2 fit)") !=
      comm.size())
    ++failures;
  options.max_ring_bytes = 600;
  {
    Loader held(comm, options);
    REQUIRE(everywhere(comm, held.prefetch_depth() == 3));
  }
  options.batches_held = 1;
  // One rank alone short of memory: every rank fails.
  options.max_ring_bytes = comm.rank() == comm.size() - 1 ? 100 : 500;
  if (ranks_agreeing(
          comm, [&] { Loader loader(comm, options); }, "does not fit the ring memory limit of 100 bytes") !=
      comm.size())
    ++failures;
  REQUIRE(failures == 0);
}

TEST_CASE("loader: a file changed since it was opened is refused at the next epoch", "[mpi][loader][errors]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  Loader checked(comm, options);
  options.check_data_unchanged = false;
  Loader unchecked(comm, options);
  const bool first_ok = loader_hashes(checked, 0).size() > 0;
  touch_back(comm, features.path());
  const int refused = ranks_agreeing(
      comm, [&] { checked.epoch(1); }, "changed during training");
  const bool unchecked_ok = loader_hashes(unchecked, 1) == expected_hashes(comm, options, 1);
  REQUIRE(everywhere(comm, first_ok && unchecked_ok));
  REQUIRE(refused == comm.size());
}

TEST_CASE("loader: a read error on one rank reaches every rank through the step's collective_try",
          "[mpi][loader][errors]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  int agreed = 0, restarted = 0;
  for (bool io_thread : {true, false}) {
    options.io_thread = io_thread;
    // The prefetcher's test hook: the last rank's read of step 2 fails, as a failing disk would.
    ::setenv("STRIDER_TEST_FAIL_READ", (std::to_string(comm.size() - 1) + ":2").c_str(), 1);
    Loader loader(comm, options);
    ::unsetenv("STRIDER_TEST_FAIL_READ");
    agreed += ranks_agreeing(
        comm,
        [&] {
          LoaderEpoch epoch = loader.epoch(0);
          while (comm.collective_try([&] { return epoch.next(); })) {
          }
        },
        "injected I/O error");
    LoaderEpoch again = loader.epoch(1);  // the Loader goes on after the error
    restarted += again.next().has_value() ? 1 : 0;
  }
  REQUIRE(agreed == 2 * comm.size());
  REQUIRE(comm.all_reduce(restarted, ReduceOp::sum) == 2 * comm.size());
}
