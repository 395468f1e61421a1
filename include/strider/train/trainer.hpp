#pragma once
/// \file
/// The training loop of strider-train, as a library call: sampler -> reader -> prefetcher ->
/// backend step -> gradient all-reduce, with exact evaluation, checkpoints, preemption, a step
/// watchdog and per-epoch statistics. strider-train parses options into a TrainerConfig and calls
/// train(); a trainer of your own can do the same or assemble the pieces itself.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/train/model.hpp"

namespace strider {

/// Everything one training run needs.
struct TrainerConfig {
  std::string data_path;             ///< the training file
  std::string eval_path;             ///< evaluation file; empty: evaluate on the training file
  ReaderOptions reader;              ///< dataset names and I/O engine
  SamplerOptions sampler;            ///< mode and its options (dataset size, labels, lengths and seed are filled in)
  std::optional<std::int64_t> seed;  ///< none: drawn on rank 0 and logged
  std::int64_t epochs = 1;
  float learning_rate = 0.1f;
  float momentum = 0.9f;
  ModelConfig model;                    ///< resolved against the dataset
  std::string backend = "auto";         ///< auto | cpu | cuda
  int prefetch = 0;                     ///< ring depth (0: auto, see prefetch_depth)
  std::int64_t eval_batch_size = 1024;  ///< samples per rank per evaluation batch
  std::int64_t reweight_every = 0;    ///< class-aware modes: re-weight from per-class recall every N epochs (0: never)
  std::string checkpoint_path;        ///< empty: no checkpoints
  std::int64_t checkpoint_every = 0;  ///< steps between checkpoints (0: only at the end and on preemption)
  bool resume = false;                ///< resume from checkpoint_path when it exists
  std::string trace_path;             ///< each rank writes trace_path.rank<r>: "epoch step id id ..."
  double step_timeout_seconds = 600.0;  ///< watchdog; <= 0 disables it
};

/// One epoch's figures (over all ranks).
struct EpochSummary {
  std::int64_t epoch = 0;
  double loss = 0.0;            ///< mean training cross-entropy over the epoch's samples
  double accuracy = 0.0;        ///< training accuracy (predictions before each update)
  double samples_per_s = 0.0;   ///< global samples / epoch wall time
  double stall_fraction = 0.0;  ///< the worst rank's stall time / wall time in this epoch
  std::int64_t samples = 0;     ///< global samples trained
  std::int64_t steps = 0;
  double seconds = 0.0;
  std::vector<double> class_weights;  ///< weights in force (class-aware modes that have them)
  double padding_efficiency = 1.0;    ///< sequences: real tokens / (count * longest row) summed over batches
};

/// One rank's totals.
struct RankSummary {
  int rank = 0;
  double stall_seconds = 0.0;
  double io_seconds = 0.0;
  double wall_seconds = 0.0;
  std::int64_t bytes_read = 0;
  std::int64_t samples = 0;
};

/// What train() did.
struct TrainSummary {
  bool preempted = false;                ///< stopped by a signal after checkpointing (exit 75)
  std::string backend;                   ///< the backend that ran
  std::int64_t seed = 0;                 ///< the agreed seed
  std::vector<EpochSummary> epochs;      ///< the epochs this run trained (not those before a resume)
  std::vector<double> per_class_recall;  ///< of the last evaluation
  double eval_accuracy = 0.0;
  std::int64_t eval_samples = 0;   ///< every evaluation sample counted exactly once
  std::vector<RankSummary> ranks;  ///< per rank (complete on every rank)
};

/// Collective over comm: every rank must call with the same config. Trains, evaluates and
/// checkpoints as configured. Returns normally when done or preempted (summary.preempted); errors
/// are agreed (AgreedError on every rank) wherever a rank can fail alone.
TrainSummary train(const Communicator& comm, const TrainerConfig& config);

/// Writes the summary as JSON: {"epochs": [{"epoch", "loss", "accuracy", "samples_per_s",
/// "stall_fraction", ...}], "per_class_recall": [...], "ranks": [{"rank", "stall_seconds",
/// "io_seconds", ...}], ...}. Not collective (rank 0 writes).
void write_train_stats_json(const std::string& path, const TrainSummary& summary);

}  // namespace strider
