#pragma once
/// \file
/// The training loop of strider-train, as a library call: backend, Loader, model, then per epoch
/// the steps (forward/backward, gradient all-reduce, SGD), with exact evaluation, checkpoints,
/// preemption, a step watchdog and per-epoch statistics. strider-train parses options into a
/// TrainerConfig and calls train(); a trainer of your own can do the same or assemble the pieces
/// itself (strider/pipeline/loader.hpp, strider/device/backend.hpp).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "strider/comm/communicator.hpp"
#include "strider/pipeline/loader_options.hpp"
#include "strider/train/model.hpp"
#include "strider/train/summary.hpp"

namespace strider {

/// Everything one training run needs.
struct TrainerConfig {
  /// The training data and how it is read and planned: file, dataset keys, engine, sampler and its
  /// options, seed (none: drawn on rank 0 and logged; on a resume the checkpoint's), prefetch depth. The trainer sets
  /// the allocator (its backend's), the epoch count and require_labels.
  LoaderOptions loader;
  std::string eval_path;  ///< evaluation file; empty: evaluate on the training file
  std::int64_t epochs = 1;
  float learning_rate = 0.1f;
  float momentum = 0.9f;
  ModelConfig model;                    ///< resolved against the dataset
  std::string backend = "auto";         ///< auto | cpu | cuda
  std::int64_t eval_batch_size = 1024;  ///< samples per rank per evaluation batch
  std::int64_t reweight_every = 0;    ///< class-aware modes: re-weight from per-class recall every N epochs (0: never)
  std::string checkpoint_path;        ///< empty: no checkpoints
  std::int64_t checkpoint_every = 0;  ///< steps between checkpoints (0: only at the end and on preemption)
  bool resume = false;                ///< resume from checkpoint_path when it exists
  std::string trace_path;             ///< each rank writes trace_path.rank<r>: "epoch step id id ..."
  double step_timeout_seconds = 600.0;  ///< watchdog; <= 0 disables it
  /// Fixed-size samples: "none" (inputs as stored; when the first rows' mean magnitude exceeds 100,
  /// one warning says what to pass), "auto" (inputs become `(x - mean) / stddev` in the backend,
  /// with statistics over every row computed at start, strider/train/input_statistics.hpp) or a
  /// FILE.json that `strider-inspect stats --json` wrote (its statistics; its sample shape must be
  /// the data's). The checkpoint records the statistics and a resume uses the recorded ones.
  std::string normalize = "none";
  std::string channel_axis = "auto";  ///< image samples: which axis holds the channels (auto, 1, last)
  /// Rank 0 prints a progress line (epoch, step, samples/s, stall, ETA) on stderr this often, in
  /// seconds (strider/core/progress.hpp); 0: never.
  double progress_seconds = 0.0;

  /// How errors and log lines name this struct's fields: field name ("epochs") -> the caller's
  /// name for it (strider-train: "--epochs"). A field not in the map is named
  /// "TrainerConfig::<field>". The options of `loader` are named as the shared option table names
  /// them ("--sampler").
  std::map<std::string, std::string, std::less<>> setting_names;

  /// The name of `field` in messages (see setting_names).
  std::string setting_name(std::string_view field) const;
};

/// Collective over comm: every rank must call with the same config. Trains, evaluates and
/// checkpoints as configured. Returns normally when done or preempted (summary.preempted); errors
/// are agreed (AgreedError on every rank) wherever a rank can fail alone. Invalid settings are
/// refused first, on every rank, as an AgreedError with exit code 2 naming the field
/// ("TrainerConfig::epochs must be >= 1, got 0"; see setting_names). Installs the SIGUSR1/SIGTERM
/// stop handlers (strider/train/stop_signal.hpp).
TrainSummary train(const Communicator& comm, const TrainerConfig& config);

}  // namespace strider
