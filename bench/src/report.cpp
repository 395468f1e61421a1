#include "strider/bench/report.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "strider/bench/workload_preset.hpp"
#include "strider/core/json_writer.hpp"

namespace strider {

namespace {

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

/// Each start-up phase's slowest rank.
StartupFigures slowest_startup(const std::vector<RankFigures>& ranks) {
  StartupFigures slowest;
  for (const RankFigures& rank : ranks) {
    slowest.exec_to_main_seconds = std::max(slowest.exec_to_main_seconds, rank.startup.exec_to_main_seconds);
    slowest.mpi_init_seconds = std::max(slowest.mpi_init_seconds, rank.startup.mpi_init_seconds);
    slowest.loader_seconds = std::max(slowest.loader_seconds, rank.startup.loader_seconds);
    slowest.first_batch_seconds = std::max(slowest.first_batch_seconds, rank.startup.first_batch_seconds);
  }
  return slowest;
}

/// The job's totals over its ranks.
struct Totals {
  double max_wall = 0, stall = 0, wall = 0, first_batch = 0, io_max = 0, io_sum = 0;
  std::int64_t samples = 0, useful = 0, read = 0, rss = 0;
  double samples_per_s = 0, bytes_per_s = 0, stall_fraction = 0, amplification = 0, imbalance = 1.0, cpu = 0,
         samples_per_cpu_s = 0;
};

Totals totals(const std::vector<RankFigures>& ranks) {
  Totals t;
  for (const RankFigures& rank : ranks) {
    t.max_wall = std::max(t.max_wall, rank.wall_seconds);
    t.stall += rank.stall_seconds;
    t.wall += rank.wall_seconds;
    t.first_batch = std::max(t.first_batch, rank.time_to_first_batch_seconds);
    t.io_max = std::max(t.io_max, rank.io_seconds);
    t.io_sum += rank.io_seconds;
    t.samples += rank.samples;
    t.useful += rank.useful_bytes;
    t.read += rank.bytes_read;
    t.rss = std::max(t.rss, rank.peak_rss_bytes);
    t.cpu += rank.cpu_seconds;
  }
  t.samples_per_s = t.max_wall > 0 ? static_cast<double>(t.samples) / t.max_wall : 0;
  t.bytes_per_s = t.max_wall > 0 ? static_cast<double>(t.useful) / t.max_wall : 0;
  t.stall_fraction = t.wall > 0 ? t.stall / t.wall : 0;
  t.amplification = t.useful > 0 ? static_cast<double>(t.read) / static_cast<double>(t.useful) : 0;
  t.imbalance = t.io_sum > 0 ? t.io_max / (t.io_sum / static_cast<double>(ranks.size())) : 1.0;
  t.samples_per_cpu_s = t.cpu > 0 ? static_cast<double>(t.samples) / t.cpu : 0;
  return t;
}

}  // namespace

std::string bench_table(const BenchSetup& setup, const BenchFigures& figures) {
  const std::vector<RankFigures>& ranks = figures.ranks;
  const UtilizationSummary& utilization = figures.utilization;
  const std::vector<EpochFigures>& epochs = figures.epochs;
  const StoreFigures& store = figures.store;
  const Totals t = totals(ranks);
  const WorkloadPreset* preset = setup.workload.empty() ? nullptr : &workload_preset(setup.workload);
  std::ostringstream table;
  table << std::fixed << std::setprecision(3);
  table << "strider-bench: " << setup.loading.data_path << ", " << setup.world << " ranks, sampler "
        << setup.loading.sampler.mode << (setup.shuffle == "local" ? " (local shuffle)" : "") << ", batch "
        << setup.loading.sampler.batch_size << ", engine " << setup.loading.reader.engine
        << (setup.loading.reader.odirect ? ", O_DIRECT"
            : setup.cold                 ? ", cold cache"
                                         : ", warm cache")
        << ", compute " << setup.compute_us << " us"
        << (setup.warmup_epochs > 0 ? ", after " + std::to_string(setup.warmup_epochs) + " warm-up epochs" : "")
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
  table << "  total " << std::setprecision(0) << t.samples_per_s << " samples/s, " << std::setprecision(3)
        << t.bytes_per_s / 1e9 << " GB/s useful, stall " << std::setprecision(1) << 100 * t.stall_fraction
        << "%, first batch " << std::setprecision(4) << t.first_batch << " s, read/useful " << std::setprecision(3)
        << t.amplification << ", peak RSS " << std::setprecision(1) << static_cast<double>(t.rss) / 1048576.0
        << " MiB, read-time imbalance " << std::setprecision(3) << t.imbalance << "\n";
  if (setup.compute_us > 0) {
    table << "  AU " << std::setprecision(1) << 100 * utilization.au << "% (lowest rank " << 100 * utilization.au_min
          << "%)";
    if (preset != nullptr)
      table << (utilization.passed ? " >= " : " < ") << 100 * preset->au_threshold
            << "%: " << (utilization.passed ? "passed" : "failed") << "; " << setup.world << " accelerators of "
            << setup.workload << " x" << std::setprecision(3) << setup.accelerator_slowdown << " = "
            << setup.world / setup.accelerator_slowdown << " H100s";
    table << "; " << std::setprecision(3) << utilization.bytes_per_s / 1e9
          << " GB/s useful in the AU window (each epoch's first step left out)\n";
  }
  if (store.on)
    table << "  store: " << store.layout << " over " << store.nodes << (store.nodes == 1 ? " node" : " nodes")
          << ", loaded in " << std::setprecision(3) << store.load_seconds << " s (" << std::setprecision(1)
          << static_cast<double>(store.load_bytes_read) / 1e6 << " MB from the file), "
          << static_cast<double>(store.bytes_per_node) / 1048576.0 << " MiB resident per node\n";
  for (std::size_t e = 0; e < epochs.size() && (epochs.size() > 1 || store.on); ++e)
    table << "  epoch " << setup.warmup_epochs + static_cast<std::int64_t>(e) << ": " << std::setprecision(0)
          << (epochs[e].seconds > 0 ? static_cast<double>(epochs[e].samples) / epochs[e].seconds : 0)
          << " samples/s, file " << std::setprecision(1) << static_cast<double>(epochs[e].bytes_read_file) / 1e6
          << " MB, remote " << static_cast<double>(epochs[e].bytes_remote) / 1e6 << " MB in "
          << epochs[e].remote_requests << " requests, local " << static_cast<double>(epochs[e].bytes_local) / 1e6
          << " MB\n";
  table << "  cpu " << std::setprecision(3) << t.cpu
        << " s (user + system, all ranks and threads): " << std::setprecision(0) << t.samples_per_cpu_s
        << " samples per CPU-second\n";
  const StartupFigures startup = slowest_startup(ranks);
  table << "  start-up, slowest rank each: exec to main " << std::setprecision(1) << 1e3 * startup.exec_to_main_seconds
        << " ms, MPI init " << 1e3 * startup.mpi_init_seconds << " ms, Loader (open, seed, plan) "
        << 1e3 * startup.loader_seconds << " ms, then the first batch " << 1e3 * startup.first_batch_seconds << " ms\n";
  write_account(table, ranks);
  for (const RankFigures& rank : ranks) {
    if (!rank.layout.decided) continue;
    table << "  rank " << rank.rank << " thread layout: "
          << (rank.layout.caller_thread ? "read on the consumer's thread" : "read ahead on the I/O thread")
          << std::setprecision(2) << " (per step " << rank.layout.io_thread_us_per_step << " us with the I/O thread, "
          << rank.layout.caller_thread_us_per_step << " us on the consumer's"
          << (rank.layout.spare_core ? ")\n" : "; no core to spare for an I/O thread)\n");
  }
  return table.str();
}

void write_bench_json(std::ostream& file, const BenchSetup& setup, const BenchFigures& figures) {
  const std::vector<RankFigures>& ranks = figures.ranks;
  const UtilizationSummary& utilization = figures.utilization;
  const std::vector<EpochFigures>& epochs = figures.epochs;
  const StoreFigures& store = figures.store;
  const Totals t = totals(ranks);
  const WorkloadPreset* preset = setup.workload.empty() ? nullptr : &workload_preset(setup.workload);
  JsonWriter json(file);
  json.begin_object();
  json.field("data", setup.loading.data_path);
  json.field("world", setup.world);
  json.field("sampler", setup.loading.sampler.mode);
  if (setup.shuffle != "global") json.field("shuffle", setup.shuffle);
  json.field("engine", setup.loading.reader.engine);
  json.field("batch_size", setup.loading.sampler.batch_size);
  json.field("sample_bytes", setup.sample_bytes);
  json.field("compute_us", setup.compute_us);
  json.field("prefetch", setup.prefetch);
  json.field("labels_per_batch", setup.labels_per_batch);
  json.field("cold", setup.cold);
  json.field("warmup_epochs", setup.warmup_epochs);
  json.field("samples", t.samples);
  json.field("useful_bytes", t.useful);
  json.field("bytes_read", t.read);
  json.field("wall_s", t.max_wall);
  json.field("read_time_imbalance", t.imbalance);
  json.field("odirect", setup.loading.reader.odirect);
  json.field("au", utilization.au);
  json.field("au_min", utilization.au_min);
  json.field("steady_samples_per_s", utilization.samples_per_s);
  json.field("steady_bytes_per_s", utilization.bytes_per_s);
  if (preset != nullptr) {
    json.field("workload", setup.workload);
    json.field("au_threshold", utilization.au_threshold);
    json.field("passed", utilization.passed);
    json.field("accelerator_slowdown", setup.accelerator_slowdown);
    json.field("h100_equivalents", setup.world / setup.accelerator_slowdown);
    json.field("preset_sample_bytes", preset->sample_bytes);
  }
  write_figures(json, t.samples_per_s, t.bytes_per_s, t.stall_fraction, t.first_batch, t.amplification, t.rss);
  json.field("store", store.on ? std::string("memory") : std::string("none"));
  json.field("lookahead", setup.loading.lookahead);
  if (store.on) {
    json.field("store_layout", store.layout);
    json.field("store_nodes", store.nodes);
    json.field("store_load_seconds", store.load_seconds);
    json.field("store_load_bytes_read", store.load_bytes_read);
    json.field("store_bytes_per_node", store.bytes_per_node);
    json.field("store_segment_bytes", store.segment_bytes);
  }
  json.field("cpu_seconds", t.cpu);
  json.field("samples_per_cpu_s", t.samples_per_cpu_s);
  const StartupFigures startup = slowest_startup(ranks);
  json.key("startup_s");  // each phase's slowest rank (StartupFigures)
  json.begin_object();
  json.field("exec_to_main", startup.exec_to_main_seconds);
  json.field("mpi_init", startup.mpi_init_seconds);
  json.field("loader", startup.loader_seconds);
  json.field("first_batch", startup.first_batch_seconds);
  json.end_object();
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
    json.field("thread_layout", thread_layout_name(setup.loading, rank.layout));
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
}

}  // namespace strider
