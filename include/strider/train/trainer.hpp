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
#include "strider/train/summary.hpp"

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

/// Collective over comm: every rank must call with the same config. Trains, evaluates and
/// checkpoints as configured. Returns normally when done or preempted (summary.preempted); errors
/// are agreed (AgreedError on every rank) wherever a rank can fail alone.
TrainSummary train(const Communicator& comm, const TrainerConfig& config);

}  // namespace strider
