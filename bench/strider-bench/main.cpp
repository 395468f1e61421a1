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
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/cli.hpp"
#include "strider/bench/accelerator_utilization.hpp"
#include "strider/bench/prefetch_account.hpp"
#include "strider/bench/step_emulator.hpp"
#include "strider/bench/workload_preset.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/json_writer.hpp"
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

/// One epoch's figures, summed over ranks (seconds: the slowest rank's).
struct EpochFigures {
  double seconds = 0;
  std::int64_t samples = 0, bytes_read_file = 0, bytes_remote = 0, bytes_local = 0, remote_requests = 0;
};

/// The store's figures (--store memory): the job's load time, file bytes read by the load, and the
/// node memory it takes (per node: the summed PSS of its ranks' mappings; the largest node's).
struct StoreFigures {
  bool on = false;
  std::string layout;
  int nodes = 1;
  double load_seconds = 0;
  std::int64_t load_bytes_read = 0, bytes_per_node = 0, segment_bytes = 0;
};

/// One rank's figures.
struct RankFigures {
  int rank = 0;
  double wall_seconds = 0, stall_seconds = 0, io_seconds = 0, time_to_first_batch_seconds = 0;
  double au = 0;                    // this rank's accelerator utilization (accelerator_utilization.hpp)
  double steady_samples_per_s = 0;  // over this rank's AU windows; the job's is the ranks' sum
  std::int64_t samples = 0, batches = 0, useful_bytes = 0, bytes_read = 0, peak_rss_bytes = 0;
  // The CPU account: where this rank's CPU time went (seconds over the measured epochs).
  double cpu_seconds = 0;           // the whole process, user + system, every thread
  double consumer_cpu_seconds = 0;  // the thread that takes the batches (the emulated step included)
  double step_seconds = 0;          // wall time in the emulated step
  double io_thread_cpu_seconds = 0, epoch_plan_cpu_seconds = 0;
  double plan_seconds = 0, copy_seconds = 0, labels_seconds = 0, handoff_seconds = 0, io_idle_seconds = 0,
         consumer_handoff_seconds = 0;
  std::int64_t epoch_orders_copied = 0;  // epochs whose order this rank copied from its node's writer
  std::int64_t consumer_sleeps = 0, io_wakeups = 0, io_voluntary_switches = 0, io_involuntary_switches = 0,
               caller_thread_batches = 0;
  LayoutMeasurement layout;  // the thread layout measured (--io-thread auto)
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

std::int64_t peak_rss_bytes() {
  rusage usage_now{};
  getrusage(RUSAGE_SELF, &usage_now);
  return static_cast<std::int64_t>(usage_now.ru_maxrss) * 1024;
}

void write_figures(JsonWriter& json, double samples_per_s, double bytes_per_s, double stall, double first_batch,
                   double amplification, std::int64_t rss) {
  json.field("samples_per_s", samples_per_s);
  json.field("bytes_per_s", bytes_per_s);
  json.field("stall_fraction", stall);
  json.field("time_to_first_batch_s", first_batch);
  json.field("read_amplification", amplification);
  json.field("peak_rss_bytes", rss);
}

/// Where a rank read its batches: "io-thread", "caller", or "measuring" (--io-thread auto, undecided).
std::string thread_layout_name(const LoaderOptions& loading, const LayoutMeasurement& layout) {
  if (layout.decided) return layout.caller_thread ? "caller" : "io-thread";
  if (layout.measuring) return "measuring";
  return loading.io_thread ? "io-thread" : "caller";
}

/// One line of the CPU account: a JSON key, a label for the table, and its value per batch.
struct AccountLine {
  std::string key, label;
  double value;
};

/// The per-batch account of one rank: CPU by thread (process = consumer + I/O thread + epoch
/// planning + other), the reading thread's wall time by phase, and the kernel round trips. Times in
/// microseconds per batch, counts per batch.
std::vector<AccountLine> account_lines(const RankFigures& rank) {
  const double batches = static_cast<double>(std::max<std::int64_t>(rank.batches, 1));
  const auto us = [&](double seconds) { return 1e6 * seconds / batches; };
  const auto per = [&](std::int64_t count) { return static_cast<double>(count) / batches; };
  const double other =
      rank.cpu_seconds - rank.consumer_cpu_seconds - rank.io_thread_cpu_seconds - rank.epoch_plan_cpu_seconds;
  return {
      {"cpu", "CPU, whole process", us(rank.cpu_seconds)},
      {"cpu_consumer", "  consumer thread (step included)", us(rank.consumer_cpu_seconds)},
      {"cpu_io_thread", "  I/O thread", us(rank.io_thread_cpu_seconds)},
      {"cpu_epoch_planning", "  planning epochs (set_epoch)", us(rank.epoch_plan_cpu_seconds)},
      {"cpu_other", "  other threads (MPI, copy threads)", us(std::max(0.0, other))},
      {"step", "step (wall, emulated)", us(rank.step_seconds)},
      {"batch_indices", "reading: batch indices", us(rank.plan_seconds)},
      {"copy", "reading: copy (samples, fused labels)", us(rank.copy_seconds)},
      {"labels", "reading: labels apart", us(rank.labels_seconds)},
      {"io_handoff", "I/O thread: lock, queue, wake", us(rank.handoff_seconds)},
      {"io_idle", "I/O thread: idle (no free buffer)", us(rank.io_idle_seconds)},
      {"consumer_handoff", "consumer: in next(), not waiting", us(rank.consumer_handoff_seconds)},
      {"consumer_wait", "consumer: waiting (stall)", us(rank.stall_seconds)},
      {"consumer_sleeps", "consumer sleeps (count)", per(rank.consumer_sleeps)},
      {"io_wakeups", "I/O thread wake-ups (count)", per(rank.io_wakeups)},
      {"io_voluntary_switches", "I/O thread blocked (count)", per(rank.io_voluntary_switches)},
      {"io_involuntary_switches", "I/O thread preempted (count)", per(rank.io_involuntary_switches)},
      {"caller_thread_batches", "batches read on the consumer (share)", per(rank.caller_thread_batches)},
  };
}

/// The account as a table: one column per rank, microseconds (or counts) per batch.
void write_account(std::ostringstream& table, const std::vector<RankFigures>& ranks) {
  std::vector<std::vector<AccountLine>> lines;
  for (const RankFigures& rank : ranks) lines.push_back(account_lines(rank));
  table << "  per batch (us; counts)                 ";
  for (const RankFigures& rank : ranks) table << std::setw(9) << ("rank " + std::to_string(rank.rank));
  table << "\n";
  for (std::size_t line = 0; line < lines.front().size(); ++line) {
    table << "    " << std::left << std::setw(39) << lines.front()[line].label << std::right;
    for (const auto& rank_lines : lines) table << std::setw(9) << std::setprecision(2) << rank_lines[line].value;
    table << "\n";
  }
}

void report(const Communicator& world, const BenchOptions& options, const std::vector<RankFigures>& ranks,
            const UtilizationSummary& utilization, const std::vector<EpochFigures>& epochs, const StoreFigures& store);

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
        while (std::optional<Batch> batch = batches.next()) step.run();
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
    if (world.is_root()) report(world, options, ranks, utilization, epochs, store);
  });
  return 0;
}

/// Rank 0: the table on stdout and the JSON file.
void report(const Communicator& world, const BenchOptions& options, const std::vector<RankFigures>& ranks,
            const UtilizationSummary& utilization, const std::vector<EpochFigures>& epochs, const StoreFigures& store) {
  double max_wall = 0, stall = 0, wall = 0, first_batch = 0, io_max = 0, io_sum = 0;
  std::int64_t samples = 0, useful = 0, read = 0, rss = 0;
  for (const RankFigures& rank : ranks) {
    max_wall = std::max(max_wall, rank.wall_seconds);
    stall += rank.stall_seconds;
    wall += rank.wall_seconds;
    first_batch = std::max(first_batch, rank.time_to_first_batch_seconds);
    io_max = std::max(io_max, rank.io_seconds);
    io_sum += rank.io_seconds;
    samples += rank.samples;
    useful += rank.useful_bytes;
    read += rank.bytes_read;
    rss = std::max(rss, rank.peak_rss_bytes);
  }
  const double samples_per_s = max_wall > 0 ? static_cast<double>(samples) / max_wall : 0;
  const double bytes_per_s = max_wall > 0 ? static_cast<double>(useful) / max_wall : 0;
  const double stall_fraction = wall > 0 ? stall / wall : 0;
  const double amplification = useful > 0 ? static_cast<double>(read) / static_cast<double>(useful) : 0;
  const double imbalance = io_sum > 0 ? io_max / (io_sum / static_cast<double>(ranks.size())) : 1.0;
  const WorkloadPreset* preset = options.workload.empty() ? nullptr : &workload_preset(options.workload);

  std::ostringstream table;
  table << std::fixed << std::setprecision(3);
  table << "strider-bench: " << options.loading.data_path << ", " << world.size() << " ranks, sampler "
        << options.loading.sampler.mode << (options.shuffle == "local" ? " (local shuffle)" : "") << ", batch "
        << options.loading.sampler.batch_size << ", engine " << options.loading.reader.engine
        << (options.loading.reader.odirect ? ", O_DIRECT"
            : options.cold                 ? ", cold cache"
                                           : ", warm cache")
        << ", compute " << options.compute_us << " us"
        << (options.warmup_epochs > 0 ? ", after " + std::to_string(options.warmup_epochs) + " warm-up epochs" : "")
        << "\n";
  table << "  rank  samples/s     GB/s  stall  first-batch(s)  read/useful  io(s)\n";
  for (const RankFigures& rank : ranks) {
    table << "  " << std::setw(4) << rank.rank << std::setw(11) << std::setprecision(0)
          << (rank.wall_seconds > 0 ? static_cast<double>(rank.samples) / rank.wall_seconds : 0) << std::setw(9)
          << std::setprecision(3)
          << (rank.wall_seconds > 0 ? static_cast<double>(rank.useful_bytes) / rank.wall_seconds / 1e9 : 0)
          << std::setw(6) << std::setprecision(1)
          << 100 * (rank.wall_seconds > 0 ? rank.stall_seconds / rank.wall_seconds : 0) << "%" << std::setw(16)
          << std::setprecision(4) << rank.time_to_first_batch_seconds << std::setw(13) << std::setprecision(3)
          << (rank.useful_bytes > 0 ? static_cast<double>(rank.bytes_read) / static_cast<double>(rank.useful_bytes) : 0)
          << std::setw(7) << rank.io_seconds << "\n";
  }
  table << "  total " << std::setprecision(0) << samples_per_s << " samples/s, " << std::setprecision(3)
        << bytes_per_s / 1e9 << " GB/s useful, stall " << std::setprecision(1) << 100 * stall_fraction
        << "%, first batch " << std::setprecision(4) << first_batch << " s, read/useful " << std::setprecision(3)
        << amplification << ", peak RSS " << std::setprecision(1) << static_cast<double>(rss) / 1048576.0
        << " MiB, read-time imbalance " << std::setprecision(3) << imbalance << "\n";
  if (options.compute_us > 0) {
    table << "  AU " << std::setprecision(1) << 100 * utilization.au << "% (lowest rank " << 100 * utilization.au_min
          << "%)";
    if (preset != nullptr)
      table << (utilization.passed ? " >= " : " < ") << 100 * preset->au_threshold
            << "%: " << (utilization.passed ? "passed" : "failed") << "; " << world.size() << " accelerators of "
            << options.workload << " x" << std::setprecision(3) << options.accelerator_slowdown << " = "
            << world.size() / options.accelerator_slowdown << " H100s";
    table << "; " << std::setprecision(3) << utilization.bytes_per_s / 1e9
          << " GB/s useful in the AU window (each epoch's first step left out)\n";
  }
  if (store.on)
    table << "  store: " << store.layout << " over " << store.nodes << (store.nodes == 1 ? " node" : " nodes")
          << ", loaded in " << std::setprecision(3) << store.load_seconds << " s (" << std::setprecision(1)
          << static_cast<double>(store.load_bytes_read) / 1e6 << " MB from the file), "
          << static_cast<double>(store.bytes_per_node) / 1048576.0 << " MiB resident per node\n";
  for (std::size_t e = 0; e < epochs.size() && (epochs.size() > 1 || store.on); ++e)
    table << "  epoch " << options.warmup_epochs + static_cast<std::int64_t>(e) << ": " << std::setprecision(0)
          << (epochs[e].seconds > 0 ? static_cast<double>(epochs[e].samples) / epochs[e].seconds : 0)
          << " samples/s, file " << std::setprecision(1) << static_cast<double>(epochs[e].bytes_read_file) / 1e6
          << " MB, remote " << static_cast<double>(epochs[e].bytes_remote) / 1e6 << " MB in "
          << epochs[e].remote_requests << " requests, local " << static_cast<double>(epochs[e].bytes_local) / 1e6
          << " MB\n";
  double cpu = 0;
  for (const RankFigures& rank : ranks) cpu += rank.cpu_seconds;
  const double samples_per_cpu_s = cpu > 0 ? static_cast<double>(samples) / cpu : 0;
  table << "  cpu " << std::setprecision(3) << cpu
        << " s (user + system, all ranks and threads): " << std::setprecision(0) << samples_per_cpu_s
        << " samples per CPU-second\n";
  write_account(table, ranks);
  for (const RankFigures& rank : ranks) {
    if (!rank.layout.decided) continue;
    table << "  rank " << rank.rank << " thread layout: "
          << (rank.layout.caller_thread ? "read on the consumer's thread" : "read ahead on the I/O thread")
          << std::setprecision(2) << " (per step " << rank.layout.io_thread_us_per_step << " us with the I/O thread, "
          << rank.layout.caller_thread_us_per_step << " us on the consumer's"
          << (rank.layout.spare_core ? ")\n" : "; no core to spare for an I/O thread)\n");
  }
  (cli::json_to_stdout(options.json) ? std::cerr : std::cout) << table.str() << std::flush;

  if (!options.json.empty()) {
    cli::JsonOutput out(options.json);
    std::ostream& file = out.stream();
    JsonWriter json(file);
    json.begin_object();
    json.field("data", options.loading.data_path);
    json.field("world", world.size());
    json.field("sampler", options.loading.sampler.mode);
    if (options.shuffle != "global") json.field("shuffle", options.shuffle);
    json.field("engine", options.loading.reader.engine);
    json.field("batch_size", options.loading.sampler.batch_size);
    json.field("sample_bytes", options.sample_bytes);
    json.field("compute_us", options.compute_us);
    json.field("prefetch", options.prefetch);
    json.field("labels_per_batch", options.labels_per_batch);
    json.field("cold", options.cold);
    json.field("warmup_epochs", options.warmup_epochs);
    json.field("samples", samples);
    json.field("useful_bytes", useful);
    json.field("bytes_read", read);
    json.field("wall_s", max_wall);
    json.field("read_time_imbalance", imbalance);
    json.field("odirect", options.loading.reader.odirect);
    json.field("au", utilization.au);
    json.field("au_min", utilization.au_min);
    json.field("steady_samples_per_s", utilization.samples_per_s);
    json.field("steady_bytes_per_s", utilization.bytes_per_s);
    if (preset != nullptr) {
      json.field("workload", options.workload);
      json.field("au_threshold", utilization.au_threshold);
      json.field("passed", utilization.passed);
      json.field("accelerator_slowdown", options.accelerator_slowdown);
      json.field("h100_equivalents", world.size() / options.accelerator_slowdown);
      json.field("preset_sample_bytes", preset->sample_bytes);
    }
    write_figures(json, samples_per_s, bytes_per_s, stall_fraction, first_batch, amplification, rss);
    json.field("store", store.on ? std::string("memory") : std::string("none"));
    json.field("lookahead", options.loading.lookahead);
    if (store.on) {
      json.field("store_layout", store.layout);
      json.field("store_nodes", store.nodes);
      json.field("store_load_seconds", store.load_seconds);
      json.field("store_load_bytes_read", store.load_bytes_read);
      json.field("store_bytes_per_node", store.bytes_per_node);
      json.field("store_segment_bytes", store.segment_bytes);
    }
    json.field("cpu_seconds", cpu);
    json.field("samples_per_cpu_s", samples_per_cpu_s);
    json.key("ranks");
    json.begin_array();
    for (const RankFigures& rank : ranks) {
      json.begin_object();
      json.field("rank", rank.rank);
      write_figures(
          json, rank.wall_seconds > 0 ? static_cast<double>(rank.samples) / rank.wall_seconds : 0,
          rank.wall_seconds > 0 ? static_cast<double>(rank.useful_bytes) / rank.wall_seconds : 0,
          rank.wall_seconds > 0 ? rank.stall_seconds / rank.wall_seconds : 0, rank.time_to_first_batch_seconds,
          rank.useful_bytes > 0 ? static_cast<double>(rank.bytes_read) / static_cast<double>(rank.useful_bytes) : 0,
          rank.peak_rss_bytes);
      json.field("io_seconds", rank.io_seconds);
      json.field("samples", rank.samples);
      json.field("au", rank.au);
      json.field("steady_samples_per_s", rank.steady_samples_per_s);
      json.field("batches", rank.batches);
      json.field("cpu_seconds", rank.cpu_seconds);
      json.field("samples_per_cpu_s", rank.cpu_seconds > 0 ? static_cast<double>(rank.samples) / rank.cpu_seconds : 0);
      json.field("epoch_orders_copied", rank.epoch_orders_copied);
      json.field("thread_layout", thread_layout_name(options.loading, rank.layout));
      if (rank.layout.decided) {
        json.field("layout_io_thread_us_per_step", rank.layout.io_thread_us_per_step);
        json.field("layout_caller_us_per_step", rank.layout.caller_thread_us_per_step);
        json.field("layout_spare_core", rank.layout.spare_core);
      }
      json.key("account_us_per_batch");
      json.begin_object();
      for (const AccountLine& line : account_lines(rank)) json.field(line.key, line.value);
      json.end_object();
      json.end_object();
    }
    json.end_array();
    // Per measured epoch, summed over ranks (the seconds: the slowest rank's); without warm-up epochs
    // the first one's file bytes include the store's load.
    json.key("epochs");
    json.begin_array();
    for (const EpochFigures& epoch : epochs) {
      json.begin_object();
      json.field("seconds", epoch.seconds);
      json.field("samples", epoch.samples);
      json.field("samples_per_s", epoch.seconds > 0 ? static_cast<double>(epoch.samples) / epoch.seconds : 0.0);
      json.field("bytes_read_file", epoch.bytes_read_file);
      json.field("bytes_remote", epoch.bytes_remote);
      json.field("bytes_local", epoch.bytes_local);
      json.field("remote_requests", epoch.remote_requests);
      json.end_object();
    }
    json.end_array();
    json.end_object();
    file << "\n";
    out.finish();
  }
}

}  // namespace

int main(int argc, char** argv) {
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& world) { return bench_main(world, argc, argv); });
}
