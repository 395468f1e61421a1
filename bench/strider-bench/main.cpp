// strider-bench: the pipeline without a model (sampler -> reader -> prefetcher, and an emulated step),
// measured per rank and for the whole job.
//   mpirun -np 2 strider-bench --data train.h5 --batch-size 256 --compute-us 500 --json bench.json

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "common/cli.hpp"
#include "strider/bench/accelerator_utilization.hpp"
#include "strider/bench/prefetch_account.hpp"
#include "strider/bench/report.hpp"
#include "strider/bench/step_emulator.hpp"
#include "strider/bench/workload_preset.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/core/progress.hpp"
#include "strider/io/data_paths.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/pipeline/memory_store.hpp"

namespace {

using namespace strider;
namespace po = cli::po;
using Clock = std::chrono::steady_clock;

constexpr const char* usage =
    "usage: mpirun -np R strider-bench --data FILE [options]\n"
    "Runs strider's data pipeline (sampler, reader, prefetcher) without a model and reports samples/s, useful\n"
    "GB/s, time to first batch, stall fraction (time waiting for a batch / wall time), read amplification,\n"
    "peak RSS and per-rank imbalance. --compute-us emulates a step (MLPerf Storage style); --workload runs one of\n"
    "MLPerf Storage's workloads (DLIO's H100 batch and compute time, a sleeping step) and reports the accelerator\n"
    "utilization (AU) against its threshold.";

struct BenchOptions {
  LoaderOptions loading;  // the file, its engine, the sampler, the seed, prefetch, copy threads
  std::int64_t epochs = 1;
  std::int64_t warmup_epochs = 0;  // run before the clock starts, in no figure
  std::int64_t max_steps = 0;
  int prefetch = 0;               // the depth used, once the file is open
  std::int64_t sample_bytes = 0;  // of the file's samples, once it is open (0 for sequences)
  bool labels_per_batch = false;
  double compute_us = 0.0;
  std::string compute_mode = "busy";
  std::string json;
  bool cold = false;
  std::string workload;            // a WorkloadPreset's name, or empty
  std::string shuffle = "global";  // global: the sampler's order; local: each rank's own block (DLIO)
  double accelerator_slowdown = 1.0;
  double ring_memory_gb = 0.0;  // the node's rings together; 0: no limit (with --workload: half the memory available)
  cli::ProgressSetting progress;
  double progress_seconds = 0.0;  // rank 0's progress interval; 0: none
};

/// CPU seconds (user + system) of this process (CLOCK_PROCESS_CPUTIME_ID) or of the calling thread
/// (CLOCK_THREAD_CPUTIME_ID).
double cpu_seconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

void drop_from_page_cache(const std::string& path) {
  const int descriptor = ::open(path.c_str(), O_RDONLY);
  if (descriptor < 0) return;  // open_reader reports a missing file properly
  ::fdatasync(descriptor);
  const int result = ::posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED);
  ::close(descriptor);
  if (result != 0) log_warn("--cold: posix_fadvise(DONTNEED) failed on ", path, "; figures may be warm");
}

// When main was entered, and how long after the process's exec (both read at main's first line).
Clock::time_point started_main;
double exec_to_main_seconds = 0;

/// Seconds from this process's start (its exec: /proc/self/stat's starttime, in clock ticks since
/// boot, 10 ms on most kernels) to now: the dynamic loader and static initialisers. -1 if unknown.
double seconds_since_exec() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t after_name = text.rfind(')');  // the command name may hold spaces
  if (after_name == std::string::npos) return -1;
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  for (int k = 3; k <= 22 && fields >> field; ++k)  // field 3 is the state; 22 the start time
    if (k == 22) {
      timespec boot{};
      clock_gettime(CLOCK_BOOTTIME, &boot);
      const double started = std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
      return std::max(0.0, static_cast<double>(boot.tv_sec) + 1e-9 * static_cast<double>(boot.tv_nsec) - started);
    }
  return -1;
}

std::int64_t peak_rss_bytes() {
  rusage usage_now{};
  getrusage(RUSAGE_SELF, &usage_now);
  return static_cast<std::int64_t>(usage_now.ru_maxrss) * 1024;
}

/// Collective: every rank's AU windows, on every rank (ranks[r] = rank r's). Every rank has as many
/// epochs, so mostly as many windows; shorter lists are padded with empty windows and trimmed back.
std::vector<std::vector<EpochWindow>> gather_windows(const Communicator& world, const std::vector<EpochWindow>& mine) {
  const std::vector<std::int64_t> counts = world.all_gather(static_cast<std::int64_t>(mine.size()));
  const std::int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<std::vector<EpochWindow>> ranks(counts.size());
  for (std::int64_t i = 0; i < most; ++i) {
    const std::vector<EpochWindow> gathered =
        world.all_gather(i < static_cast<std::int64_t>(mine.size()) ? mine[i] : EpochWindow{});
    for (std::size_t rank = 0; rank < ranks.size(); ++rank)
      if (i < counts[rank]) ranks[rank].push_back(gathered[rank]);
  }
  return ranks;
}

/// --workload: the preset's batch and step (its compute time x --accelerator-slowdown, sleeping: an
/// accelerator the host waits on). Options the preset sets may not be given as well.
void apply_workload(const po::variables_map& values, BenchOptions& options) {
  if (!(options.accelerator_slowdown > 0) || !std::isfinite(options.accelerator_slowdown))
    STRIDER_THROW(UsageError, "--accelerator-slowdown must be a positive number");
  if (options.ring_memory_gb < 0) STRIDER_THROW(UsageError, "--ring-memory-gb must be >= 0");
  if (options.workload.empty()) {
    if (!values["accelerator-slowdown"].defaulted())
      STRIDER_THROW(UsageError, "--accelerator-slowdown needs --workload");
    return;
  }
  const WorkloadPreset& preset = workload_preset(options.workload);
  for (const char* name : {"batch-size", "compute-us", "compute-mode"})
    if (values.count(name) && !values[name].defaulted())
      STRIDER_THROW(UsageError, std::string("--workload ") + preset.name + " sets --" + name + "; drop --" + name);
  options.loading.sampler.batch_size = preset.batch_size;
  options.compute_us = preset.compute_seconds * options.accelerator_slowdown * 1e6;
  options.compute_mode = "sleep";
}

/// --shuffle local: the block sampler, one block per rank in storage order, one window (DLIO's read
/// pattern). The sampler options it sets may not be given as well.
void apply_shuffle(const po::variables_map& values, BenchOptions& options) {
  check_choice(options.shuffle, {"global", "local"}, "--shuffle");
  if (options.shuffle == "global") return;
  for (const char* name : {"sampler", "block-size", "block-window", "no-shuffle"})
    if (values.count(name) && !values[name].defaulted())
      STRIDER_THROW(UsageError, std::string("--shuffle local sets --") + name + "; drop --" + name);
  SamplerOptions& sampler = options.loading.sampler;
  sampler.mode = "block";
  sampler.block_size = 0;  // ceil(N/R), from the file
  sampler.shuffle_blocks = false;
}

/// Collective: the store's figures, agreed (every rank returns the same).
StoreFigures store_figures(const Communicator& world, const Loader& loader) {
  StoreFigures figures;
  const StoreInfo* info = loader.store();
  if (info == nullptr) return figures;
  figures.on = true;
  figures.layout = info->layout;
  figures.nodes = info->nodes;
  figures.load_seconds = info->load_seconds;
  figures.segment_bytes = info->node_bytes;
  figures.load_bytes_read = world.all_reduce(info->load_bytes_read, ReduceOp::sum);
  // Per node: its ranks' proportional shares of the segment, summed.
  std::vector<std::int64_t> per_node(static_cast<std::size_t>(info->nodes), 0);
  per_node[static_cast<std::size_t>(info->node)] = std::max<std::int64_t>(0, loader.store_resident_bytes());
  world.all_reduce(per_node.data(), static_cast<std::int64_t>(per_node.size()), ReduceOp::sum);
  figures.bytes_per_node = *std::max_element(per_node.begin(), per_node.end());
  return figures;
}

int bench_main(const Communicator& world, int argc, char** argv) {
  const Clock::time_point mpi_ready = Clock::now();
  BenchOptions options;
  cli::SharedOptions shared;
  po::options_description input("Input");
  shared.add(input, cli::loader_option_names("data"), {}, {"data"});
  input.add_options()("cold", po::bool_switch(&options.cold),
                      "drop the file from the page cache first (posix_fadvise DONTNEED)");
  po::options_description sampling("Sampling");
  shared.add(sampling, cli::loader_option_names("sampling"), {{"seed", "0"}});
  po::options_description pipeline("Pipeline");
  shared.add(pipeline, cli::loader_option_names("pipeline"));
  pipeline.add_options()("ring-memory-gb", cli::number(&options.ring_memory_gb, 0.0),
                         "the batches read ahead by this node's ranks together may take this many GB (0: no limit; "
                         "with --workload half the memory available)");
  po::options_description store_group("Store");
  shared.add(store_group, cli::loader_option_names("store"));
  po::options_description run("Run");
  run.add_options()("epochs", po::value<std::int64_t>(&options.epochs)->default_value(1), "epochs to run")(
      "warmup-epochs", po::value<std::int64_t>(&options.warmup_epochs)->default_value(0),
      "epochs run before the measured ones and left out of every figure but the time to first batch (a "
      "process's first touch of the file's mapping, the ring and the plans' memory; steady-state figures)")(
      "steps", po::value<std::int64_t>(&options.max_steps)->default_value(0),
      "at most this many steps per epoch (0: all)")("compute-us", cli::number(&options.compute_us, 0.0),
                                                    "emulated step time per batch, microseconds")(
      "compute-mode", po::value<std::string>(&options.compute_mode)->default_value("busy"),
      "busy (spin on the clock) | sleep | work (fixed CPU work)")(
      "workload", po::value<std::string>(&options.workload),
      ("an MLPerf Storage workload: " + workload_preset_names() +
       " (sets --batch-size and a sleeping step of the H100 compute time; reports AU against its threshold)")
          .c_str())("accelerator-slowdown", cli::number(&options.accelerator_slowdown, 1.0),
                    "--workload: the step is this many times an H100's (counts in H100s: ranks / this)")(
      "shuffle", po::value<std::string>(&options.shuffle)->default_value(options.shuffle),
      "global: the sampler's order over the whole dataset | local: what MLPerf Storage's DLIO reads, each rank its "
      "own contiguous block of ceil(N/R) samples, shuffled inside every epoch (the block sampler with its blocks "
      "in storage order)");
  po::options_description output("Output");
  cli::json_option(output, &options.json, "write the figures as JSON; the table then goes to stderr");
  cli::progress_options(output, options.progress);
  po::options_description diagnostics("Diagnostics");
  shared.add(diagnostics, cli::loader_option_names("diagnostics"));
  po::options_description description;
  description.add(input).add(sampling).add(pipeline).add(store_group).add(run).add(output).add(diagnostics);
  const std::vector<std::string> args = cli::arguments_every_rank_shares(world, argc, argv, 1);
  const cli::Parsed parsed = world.collective_try([&] {
    cli::Parsed result = cli::parse(args, description, usage);
    if (result.help) return result;
    shared.apply(result.values, options.loading);
    if (options.epochs < 1) STRIDER_THROW(UsageError, "--epochs must be >= 1");
    if (options.warmup_epochs < 0) STRIDER_THROW(UsageError, "--warmup-epochs must be >= 0");
    if (options.warmup_epochs > 0 && options.cold)
      STRIDER_THROW(UsageError,
                    "--cold measures reads from storage, which --warmup-epochs would do before the clock starts: "
                    "give one or the other");
    if (options.max_steps < 0) STRIDER_THROW(UsageError, "--steps must be >= 0");
    if (options.compute_us < 0) STRIDER_THROW(UsageError, "--compute-us must be >= 0");
    check_choice(options.compute_mode, {"busy", "sleep", "work"}, "--compute-mode");
    apply_workload(result.values, options);
    apply_shuffle(result.values, options);
    options.progress_seconds = world.is_root() ? cli::progress_interval(result.values, options.progress) : 0.0;
    if (world.is_root() && !options.json.empty() && !cli::json_to_stdout(options.json))
      check_output_path(options.json, "--json");
    return result;
  });
  if (parsed.help) return 0;

  if (options.cold) {
    // Every shard; a --data that names nothing is reported by the Loader.
    std::vector<std::string> shards;
    try {
      shards = expand_data_paths(options.loading.data_path);
    } catch (const UsageError&) {
    }
    for (const std::string& shard : shards) drop_from_page_cache(shard);
    world.barrier();
  }
  // The Loader holds labels in memory only when the sampler's plan needs them (a streaming run's
  // memory does not grow with N), and plans each next epoch on another thread while one is read.
  options.loading.epochs = options.warmup_epochs + options.epochs;
  options.loading.max_steps_per_epoch = options.max_steps;
  // Large batches (a unet3d batch is about 1 GB) cap the ring's depth by memory, shared by the
  // node's ranks.
  double ring_bytes_per_node = options.ring_memory_gb * 1e9;
  if (ring_bytes_per_node <= 0 && !options.workload.empty())
    ring_bytes_per_node = static_cast<double>(std::max<std::int64_t>(0, node_memory().mem_available)) / 2;
  if (ring_bytes_per_node > 0)
    options.loading.max_ring_bytes = static_cast<std::int64_t>(ring_bytes_per_node / world.local_size());
  // The per-batch account (where the reading's time goes) subscribes to the pipeline's events.
  const auto prefetch_account = std::make_shared<PrefetchAccount>();
  options.loading.diagnostics.observer = prefetch_account;
  Loader loader(world, options.loading);
  world.collective_try([&] { loader.require_steps(0); });
  const Clock::time_point loader_ready = Clock::now();
  std::optional<Clock::time_point> first_batch_at;  // the first batch of the run, warm-up or measured
  if (world.is_root() && !options.workload.empty() &&
      loader.dataset().sample_bytes != workload_preset(options.workload).sample_bytes)
    log_warn("the samples of ", options.loading.data_path, " are ", loader.dataset().sample_bytes, " bytes, ",
             options.workload, "'s are ", workload_preset(options.workload).sample_bytes,
             " (write them with strider-gen --workload ", options.workload, "): the figures are not ", options.workload,
             "'s");
  options.prefetch = loader.prefetch_depth();
  options.sample_bytes = loader.dataset().sample_bytes;
  if (world.is_root())
    log_info("prefetch depth ", options.prefetch, options.loading.prefetch > 0 ? "" : " (auto)",
             options.loading.max_ring_bytes > 0
                 ? ", within " + std::to_string(options.loading.max_ring_bytes) + " bytes of batches per rank"
                 : "");
  options.labels_per_batch = loader.dataset().labels_per_batch;

  StepEmulator step(options.compute_us, options.compute_mode);  // calibrates before the clock starts
  // Warm-up epochs run as the measured ones do (the step included, so that --io-thread auto measures
  // what it will run), before the clock starts; only their time to first batch is kept.
  double warmup_first_batch_seconds = -1;
  if (options.warmup_epochs > 0) {
    world.barrier();
    loader.reset_stats();
    prefetch_account->reset();
    for (std::int64_t epoch = 0; epoch < options.warmup_epochs; ++epoch) {
      LoaderEpoch batches = loader.epoch(epoch);  // collective, its errors agreed
      world.collective_try([&] {
        while (std::optional<Batch> batch = batches.next()) {
          if (!first_batch_at) first_batch_at = Clock::now();
          step.run();
        }
      });
    }
    warmup_first_batch_seconds = loader.stats().time_to_first_batch_seconds;
  }
  // The per-step record's memory is taken (and touched) before the clock starts, so that neither its
  // growth nor its page faults count in strider's time and CPU (epochs of other lengths still fit:
  // the vector grows).
  std::vector<StepTiming> steps;  // for the accelerator utilization; no barrier per step (as in DLIO)
  world.collective_try([&] {
    steps.resize(static_cast<std::size_t>(options.epochs * loader.steps(options.warmup_epochs)));
    steps.clear();
  });
  world.barrier();
  const Clock::time_point start = Clock::now();
  const double process_cpu_start = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID),
               consumer_cpu_start = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  double step_seconds = 0;
  loader.reset_stats();
  prefetch_account->reset();
  const auto since_start = [&start] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  // Per epoch: seconds, samples, bytes from the file, from other nodes, from this node's memory.
  std::vector<double> epoch_seconds;
  std::vector<std::int64_t> epoch_counts;
  PrefetchStats before = loader.stats();
  // Rank 0's progress line: its samples x ranks, its stall.
  ProgressReporter progress(options.progress_seconds);
  const std::int64_t steps_per_epoch = loader.steps(options.warmup_epochs);
  for (std::int64_t epoch = options.warmup_epochs; epoch < options.warmup_epochs + options.epochs; ++epoch) {
    const Clock::time_point epoch_start = Clock::now();
    LoaderEpoch batches = loader.epoch(epoch);  // collective, its errors agreed
    world.collective_try([&] {
      for (std::int64_t step_in_epoch = 1;; ++step_in_epoch) {
        StepTiming timing{epoch, since_start(), 0, 0, 0, 0};
        std::optional<Batch> batch = batches.next();  // released at the end of the iteration
        if (!batch) break;
        if (!first_batch_at) first_batch_at = Clock::now();
        timing.compute_start_s = since_start();
        timing.samples = batch->size();
        timing.bytes = batch->samples_bytes();
        step.run();
        timing.compute_end_s = since_start();
        step_seconds += timing.compute_end_s - timing.compute_start_s;
        steps.push_back(timing);
        if (progress.step_due()) {
          const std::int64_t measured = epoch - options.warmup_epochs;
          const PrefetchStats now = loader.stats();
          progress.print(ProgressPoint{measured, options.epochs, step_in_epoch, steps_per_epoch,
                                       (options.epochs - measured) * steps_per_epoch - step_in_epoch,
                                       now.samples * world.size(), now.stall_seconds});
        }
      }
    });
    epoch_seconds.push_back(std::chrono::duration<double>(Clock::now() - epoch_start).count());
    const PrefetchStats after = loader.stats();
    for (std::int64_t value : {after.samples - before.samples, after.bytes_read - before.bytes_read,
                               after.bytes_remote - before.bytes_remote, after.bytes_local - before.bytes_local,
                               after.remote_requests - before.remote_requests})
      epoch_counts.push_back(value);
    before = after;
  }
  RankFigures mine;
  mine.wall_seconds = since_start();
  const auto seconds_between = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  mine.startup.exec_to_main_seconds = exec_to_main_seconds;
  mine.startup.mpi_init_seconds = seconds_between(started_main, mpi_ready);
  mine.startup.loader_seconds = seconds_between(mpi_ready, loader_ready);
  mine.startup.first_batch_seconds = first_batch_at ? seconds_between(loader_ready, *first_batch_at) : 0.0;
  mine.cpu_seconds = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start;  // before the bench's own sums
  mine.consumer_cpu_seconds = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - consumer_cpu_start;
  const std::vector<EpochWindow> windows = epoch_windows(steps);
  mine.au = accelerator_utilization(windows);
  mine.steady_samples_per_s = summarize_utilization({windows}, 0.0).samples_per_s;
  mine.step_seconds = step_seconds;
  const PrefetchStats stats = loader.stats();
  const PrefetchAccountFigures account = prefetch_account->figures();
  mine.io_thread_cpu_seconds = account.io_thread_cpu_seconds;
  mine.epoch_plan_cpu_seconds = account.epoch_plan_cpu_seconds;
  mine.epoch_orders_copied = account.epoch_orders_copied;
  mine.plan_seconds = account.plan_seconds;
  mine.copy_seconds = account.copy_seconds;
  mine.labels_seconds = account.labels_seconds;
  mine.handoff_seconds = account.handoff_seconds;
  mine.io_idle_seconds = account.io_idle_seconds;
  mine.consumer_handoff_seconds = account.consumer_handoff_seconds;
  mine.consumer_sleeps = account.consumer_sleeps;
  mine.io_wakeups = account.io_wakeups;
  mine.io_voluntary_switches = account.io_voluntary_switches;
  mine.io_involuntary_switches = account.io_involuntary_switches;
  mine.caller_thread_batches = account.caller_thread_batches;
  mine.layout = loader.thread_layout();
  mine.rank = world.rank();
  mine.stall_seconds = stats.stall_seconds;
  mine.io_seconds = stats.io_seconds;
  mine.time_to_first_batch_seconds =
      std::max(0.0, options.warmup_epochs > 0 ? warmup_first_batch_seconds : stats.time_to_first_batch_seconds);
  mine.samples = stats.samples;
  mine.batches = stats.batches;
  mine.useful_bytes = stats.useful_bytes;
  mine.bytes_read = stats.bytes_read;
  mine.peak_rss_bytes = peak_rss_bytes();
  const StoreFigures store = store_figures(world, loader);
  loader.close();
  const std::vector<RankFigures> ranks = world.all_gather(mine);
  const WorkloadPreset* preset = options.workload.empty() ? nullptr : &workload_preset(options.workload);
  const UtilizationSummary utilization =
      summarize_utilization(gather_windows(world, windows), preset ? preset->au_threshold : 0.0);
  world.all_reduce(epoch_seconds.data(), static_cast<std::int64_t>(epoch_seconds.size()), ReduceOp::max);
  world.all_reduce(epoch_counts.data(), static_cast<std::int64_t>(epoch_counts.size()), ReduceOp::sum);
  std::vector<EpochFigures> epochs(epoch_seconds.size());
  for (std::size_t e = 0; e < epochs.size(); ++e) {
    const std::int64_t* counts = &epoch_counts[5 * e];
    epochs[e] = EpochFigures{epoch_seconds[e], counts[0], counts[1], counts[2], counts[3], counts[4]};
  }
  // The store reads the file while the Loader is built, before the first epoch: its bytes count there.
  if (store.on && !epochs.empty() && options.warmup_epochs == 0) epochs[0].bytes_read_file += store.load_bytes_read;
  world.collective_try([&] {
    if (!world.is_root()) return;
    BenchSetup setup;
    setup.loading = options.loading;
    setup.world = world.size();
    setup.shuffle = options.shuffle;
    setup.sample_bytes = options.sample_bytes;
    setup.prefetch = options.prefetch;
    setup.labels_per_batch = options.labels_per_batch;
    setup.compute_us = options.compute_us;
    setup.cold = options.cold;
    setup.warmup_epochs = options.warmup_epochs;
    setup.workload = options.workload;
    setup.accelerator_slowdown = options.accelerator_slowdown;
    const BenchFigures figures{ranks, utilization, epochs, store};
    // The table goes to stderr where the JSON takes stdout.
    (cli::json_to_stdout(options.json) ? std::cerr : std::cout) << bench_table(setup, figures) << std::flush;
    if (!options.json.empty()) {
      cli::JsonOutput out(options.json);
      write_bench_json(out.stream(), setup, figures);
      out.finish();
    }
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  started_main = Clock::now();
  exec_to_main_seconds = seconds_since_exec();
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& world) { return bench_main(world, argc, argv); });
}
