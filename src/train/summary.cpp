// The JSON form of a training run's summary (strider-train --json).
#include "strider/train/summary.hpp"

#include <fstream>

#include "strider/core/error.hpp"
#include "strider/core/json_writer.hpp"

namespace strider {

void write_train_stats_json(const std::string& path, const TrainSummary& summary) {
  std::ofstream file(path);
  if (!file) STRIDER_THROW(SystemError, "cannot write the stats file '" + path + "'");
  write_train_stats_json(file, summary);
}

void write_train_stats_json(std::ostream& file, const TrainSummary& summary) {
  JsonWriter json(file);
  json.begin_object();
  json.field("backend", summary.backend);
  json.field("seed", summary.seed);
  json.field("preempted", summary.preempted);
  json.key("epochs");
  json.begin_array();
  for (const EpochSummary& epoch : summary.epochs) {
    json.begin_object();
    json.field("epoch", epoch.epoch);
    json.field("loss", epoch.loss);
    json.field("accuracy", epoch.accuracy);
    json.field("samples_per_s", epoch.samples_per_s);
    json.field("stall_fraction", epoch.stall_fraction);
    json.field("samples", epoch.samples);
    json.field("steps", epoch.steps);
    json.field("seconds", epoch.seconds);
    json.field("padding_efficiency", epoch.padding_efficiency);
    if (!epoch.class_weights.empty()) {
      json.key("class_weights");
      json.array(epoch.class_weights);
    }
    if (!epoch.per_class_recall.empty()) {
      json.key("per_class_recall");
      json.array(epoch.per_class_recall);
    }
    json.end_object();
  }
  json.end_array();
  json.key("per_class_recall");
  json.array(summary.per_class_recall);
  json.field("eval_accuracy", summary.eval_accuracy);
  json.field("eval_samples", summary.eval_samples);
  json.key("ranks");
  json.begin_array();
  for (const RankSummary& rank : summary.ranks) {
    json.begin_object();
    json.field("rank", rank.rank);
    json.field("stall_seconds", rank.stall_seconds);
    json.field("io_seconds", rank.io_seconds);
    json.field("wall_seconds", rank.wall_seconds);
    json.field("stall_fraction", rank.wall_seconds > 0 ? rank.stall_seconds / rank.wall_seconds : 0.0);
    json.field("bytes_read", rank.bytes_read);
    json.field("samples", rank.samples);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  file << '\n' << std::flush;
  if (!file) STRIDER_THROW(SystemError, "failed writing the training statistics as JSON");
}

}  // namespace strider
