// strider-train: trains a small model with strider's pipeline on every rank.
//   mpirun -np 8 strider-train --data train.h5 --sampler balanced --batch-size 64 --epochs 5
// Thin: parses options into a TrainerConfig and calls strider::train (src/train/trainer.cpp).

#include <iostream>
#include <map>
#include <string>

#include "common/cli.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/train/stop_signal.hpp"
#include "strider/train/trainer.hpp"

namespace {

using namespace strider;
namespace po = cli::po;

constexpr const char* usage =
    "usage: mpirun -np R strider-train --data FILE [options]\n"
    "Trains a small classifier (softmax, MLP, or bag of embeddings for sequences) on FILE with the chosen\n"
    "sampler, prints a line per epoch, evaluates exactly, and checkpoints. SIGUSR1/SIGTERM: checkpoint and\n"
    "exit 75 (requeue). Rank 0 prints; every rank exits with the same status.";

struct TrainOptions {
  TrainerConfig config;
  std::string stats_json;
};

/// How this app names the trainer's settings in messages: TrainerConfig field -> its option.
const std::map<std::string, std::string, std::less<>> flag_of_setting = {
    {"epochs", "--epochs"},
    {"eval_batch_size", "--eval-batch-size"},
    {"learning_rate", "--lr"},
    {"checkpoint_every", "--checkpoint-every"},
    {"reweight_every", "--reweight-every"},
    {"resume", "--resume"},
    {"checkpoint_path", "--checkpoint PATH"},
    {"backend", "--backend"},
    {"step_timeout_seconds", "--step-timeout-s"},
    {"normalize", "--normalize"},
    {"channel_axis", "--channel-axis"},
};

int train_main(const Communicator& world, int argc, char** argv) {
  TrainOptions options;
  TrainerConfig& config = options.config;
  cli::SharedOptions shared;
  po::options_description data("Data");
  shared.add(data, cli::loader_option_names("data"), {}, {"data"});
  data.add_options()("eval-data", po::value<std::string>(&config.eval_path),
                     "evaluation file (default: the training file)");
  shared.add(data, {"prefetch", "store", "store-layout", "store-budget", "lookahead"});
  data.add_options()("normalize", po::value<std::string>(&config.normalize)->default_value(config.normalize),
                     "none | auto | FILE.json: inputs become (x - mean) / std, per feature or per channel, with "
                     "statistics computed over every row at start (auto) or written by strider-inspect stats --json; "
                     "recorded in the checkpoint")(
      "channel-axis", po::value<std::string>(&config.channel_axis)->default_value(config.channel_axis),
      "image samples: channels at axis 1 ([N, C, H, W]) or last ([N, H, W, C]); auto: last when the last dimension "
      "is at most 4 and dimension 1 is larger");
  po::options_description sampling("Sampling");
  shared.add(sampling, cli::loader_option_names("sampling"));
  sampling.add_options()("epochs", po::value<std::int64_t>(&config.epochs)->default_value(config.epochs),
                         "epochs to train")(
      "reweight-every", po::value<std::int64_t>(&config.reweight_every)->default_value(0),
      "weighted sampler: update class weights from per-class recall every N epochs (0: never)");
  po::options_description model("Model and optimizer");
  model.add_options()("model", po::value<std::string>(&config.model.kind)->default_value(config.model.kind),
                      "auto | softmax | mlp | bag (auto: mlp for features, bag for sequences)")(
      "hidden", po::value<std::int64_t>(&config.model.hidden)->default_value(config.model.hidden), "mlp hidden units")(
      "embed-dim", po::value<std::int64_t>(&config.model.embed_dim)->default_value(config.model.embed_dim),
      "bag: embedding width")("vocab", po::value<std::int64_t>(&config.model.vocab)->default_value(0),
                              "bag: embedding rows (0: from the token type)")(
      "lr", po::value<float>(&config.learning_rate)->default_value(config.learning_rate), "learning rate")(
      "momentum", po::value<float>(&config.momentum)->default_value(config.momentum), "SGD momentum")(
      "backend", po::value<std::string>(&config.backend)->default_value(config.backend), "auto | cpu | cuda");
  po::options_description run("Checkpoints and output");
  run.add_options()("checkpoint", po::value<std::string>(&config.checkpoint_path),
                    "checkpoint file (written atomically)")(
      "checkpoint-every", po::value<std::int64_t>(&config.checkpoint_every)->default_value(0),
      "steps between checkpoints (0: at each epoch's end only)")(
      "resume", po::bool_switch(&config.resume), "resume from --checkpoint if it exists (else start fresh)")(
      "stats-json", po::value<std::string>(&options.stats_json), "write per-epoch and per-rank statistics as JSON")(
      "trace-samples", po::value<std::string>(&config.trace_path),
      "each rank writes PATH.rank<r>: 'epoch step id id ...'")(
      "eval-batch-size", po::value<std::int64_t>(&config.eval_batch_size)->default_value(config.eval_batch_size),
      "samples per rank per evaluation batch")(
      "step-timeout-s", po::value<double>(&config.step_timeout_seconds)->default_value(config.step_timeout_seconds),
      "abort the job when one step takes longer (a hung read or collective); 0 disables");
  po::options_description all;
  all.add(data).add(sampling).add(model).add(run);

  const std::vector<std::string> args = cli::arguments_every_rank_shares(world, argc, argv, 1);
  const cli::Parsed parsed = world.collective_try([&] {
    cli::Parsed result = cli::parse(args, all, usage);
    if (result.help) return result;
    shared.apply(result.values, config.loader);
    if (world.is_root() && !options.stats_json.empty()) check_output_path(options.stats_json, "--stats-json");
    return result;
  });
  if (parsed.help) return 0;
  config.setting_names = flag_of_setting;

  const TrainSummary summary = train(world, config);
  if (!options.stats_json.empty())
    world.collective_try([&] {
      if (world.is_root()) write_train_stats_json(options.stats_json, summary);
    });
  return summary.preempted ? exit_code_preempted : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& world) { return train_main(world, argc, argv); });
}
