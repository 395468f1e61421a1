#pragma once
/// \file
/// What a training run did: per-epoch figures over all ranks, the last exact evaluation and each
/// rank's I/O totals (train() returns it), and its JSON form (strider-train --stats-json).

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace strider {

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
  /// Training recall per class: the epoch's samples of the class predicted right (before their
  /// update, as `accuracy` counts them) / its samples trained in the epoch; NaN for a class without
  /// samples in the epoch. Empty when the data has no classes.
  std::vector<double> per_class_recall;
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

/// Writes the summary as JSON: {"epochs": [{"epoch", "loss", "accuracy", "samples_per_s",
/// "stall_fraction", ..., "per_class_recall": [...]}], "per_class_recall": [...], "ranks": [{"rank",
/// "stall_seconds", "io_seconds", ...}], ...}; an epoch's "per_class_recall" only when it has one,
/// NaN as null. Throws SystemError when the file cannot be written. Not collective
/// (rank 0 writes).
void write_train_stats_json(const std::string& path, const TrainSummary& summary);
/// The same JSON onto a stream (stdout for `--json` without a path).
void write_train_stats_json(std::ostream& out, const TrainSummary& summary);

}  // namespace strider
