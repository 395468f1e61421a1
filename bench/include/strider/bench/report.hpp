#pragma once
/// \file
/// strider-bench's report: a run's figures (per rank, per epoch, the store's), the table rank 0
/// prints and the JSON it writes (`--json`; the keys are docs/reference/json.md's).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "strider/bench/accelerator_utilization.hpp"
#include "strider/pipeline/loader_options.hpp"
#include "strider/pipeline/prefetcher.hpp"

namespace strider {

/// What was run: the Loader's options and the bench's own settings, as the report names them.
struct BenchSetup {
  LoaderOptions loading;           ///< the file, engine, sampler, seed, prefetch setting
  int world = 1;                   ///< ranks
  std::string shuffle = "global";  ///< global, or local (each rank's own block, as DLIO reads)
  std::int64_t sample_bytes = 0;   ///< of the file's samples (0 for sequences)
  int prefetch = 0;                ///< the ring depth used
  bool labels_per_batch = false;   ///< labels read with each batch (not held in memory)
  double compute_us = 0;           ///< the emulated step
  bool cold = false;               ///< the file was dropped from the page cache first
  std::int64_t warmup_epochs = 0;  ///< epochs run before the clock started
  std::string workload;            ///< an MLPerf Storage workload's name, or empty
  double accelerator_slowdown = 1.0;
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

/// Where a rank's start-up went, in seconds: from its process's exec to main (the dynamic loader;
/// 10 ms resolution, -1 unknown), MPI's initialisation, the Loader (open the file, agree on the
/// seed, check, plan the first epoch), and from then to the first batch (the first read, the first
/// touch of the file's pages and of the plan's memory). A launcher's own start (mpirun spawning
/// the ranks) comes before the exec and is not in any of them.
struct StartupFigures {
  double exec_to_main_seconds = 0, mpi_init_seconds = 0, loader_seconds = 0, first_batch_seconds = 0;
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
  StartupFigures startup;
};

/// Everything the report is made of, gathered on rank 0.
struct BenchFigures {
  std::vector<RankFigures> ranks;
  UtilizationSummary utilization;
  std::vector<EpochFigures> epochs;
  StoreFigures store;
};

/// The table strider-bench prints: the run, each rank, the totals, AU (with a step), the store,
/// the epochs, the CPU and the per-batch account.
std::string bench_table(const BenchSetup& setup, const BenchFigures& figures);
/// The JSON document of `--json`, with a final newline.
void write_bench_json(std::ostream& file, const BenchSetup& setup, const BenchFigures& figures);

}  // namespace strider
