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
  std::string json;        // --json [PATH]
  std::string stats_json;  // --stats-json PATH: the older name of --json PATH
  cli::ProgressSetting progress;
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
    {"model_kind", "--model"},
    {"step_timeout_seconds", "--step-timeout-s"},
    {"normalize", "--normalize"},
    {"channel_axis", "--channel-axis"},
};

/// The command line's options, grouped as --help lists them.
po::options_description train_options(TrainOptions& options, cli::SharedOptions& shared) {
  TrainerConfig& config = options.config;
  po::options_description input("Input");
  shared.add(input, cli::loader_option_names("data"), {}, {"data"});
  input.add_options()("eval-data", po::value<std::string>(&config.eval_path),
                      "evaluation file (default: the training file)")(
      "normalize", po::value<std::string>(&config.normalize)->default_value(config.normalize),
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
  po::options_description pipeline("Pipeline");
  shared.add(pipeline, cli::loader_option_names("pipeline"));
  po::options_description store("Store");
  shared.add(store, cli::loader_option_names("store"));
  po::options_description model("Model and optimizer");
  model.add_options()("model", po::value<std::string>(&config.model.kind)->default_value(config.model.kind),
                      "auto | softmax | mlp | bag (auto: mlp for features, bag for sequences)")(
      "hidden", po::value<std::int64_t>(&config.model.hidden)->default_value(config.model.hidden), "mlp hidden units")(
      "embed-dim", po::value<std::int64_t>(&config.model.embed_dim)->default_value(config.model.embed_dim),
      "bag: embedding width")("vocab", po::value<std::int64_t>(&config.model.vocab)->default_value(0),
                              "bag: embedding rows (0: from the token type)")(
      "lr", cli::number(&config.learning_rate, config.learning_rate), "learning rate")(
      "momentum", cli::number(&config.momentum, config.momentum), "SGD momentum")(
      "backend", po::value<std::string>(&config.backend)->default_value(config.backend), "auto | cpu | cuda")(
      "eval-batch-size", po::value<std::int64_t>(&config.eval_batch_size)->default_value(config.eval_batch_size),
      "samples per rank per evaluation batch");
  po::options_description output("Output and checkpoints");
  output.add_options()("checkpoint", po::value<std::string>(&config.checkpoint_path),
                       "checkpoint file (written atomically)")(
      "checkpoint-every", po::value<std::int64_t>(&config.checkpoint_every)->default_value(0),
      "steps between checkpoints (0: at each epoch's end only)")(
      "resume", po::bool_switch(&config.resume), "resume from --checkpoint if it exists (else start fresh)");
  cli::json_option(output, &options.json,
                   "write per-epoch and per-rank statistics as JSON; the epoch lines then go to stderr");
  output.add_options()("stats-json", po::value<std::string>(&options.stats_json)->value_name("PATH"),
                       "the older name of --json PATH");
  cli::progress_options(output, options.progress);
  po::options_description diagnostics("Diagnostics");
  shared.add(diagnostics, cli::loader_option_names("diagnostics"));
  diagnostics.add_options()("trace-samples", po::value<std::string>(&config.trace_path),
                            "each rank writes PATH.rank<r>: 'epoch step id id ...'")(
      "step-timeout-s", cli::number(&config.step_timeout_seconds, config.step_timeout_seconds),
      "abort the job when one step takes longer (a hung read or collective); 0 disables");
  po::options_description all;
  all.add(input).add(sampling).add(pipeline).add(store).add(model).add(output).add(diagnostics);
  return all;
}

/// --json and --stats-json resolved into one path (empty: none); --stats-json warns once, on rank 0.
std::string json_path(const Communicator& world, const TrainOptions& options) {
  if (options.stats_json.empty()) return options.json;
  if (!options.json.empty()) STRIDER_THROW(UsageError, "--json and --stats-json name the same output: give --json");
  if (world.is_root()) log_warn("--stats-json is the older name of --json; give --json ", options.stats_json);
  return options.stats_json;
}

int train_main(const Communicator& world, int argc, char** argv) {
  TrainOptions options;
  TrainerConfig& config = options.config;
  cli::SharedOptions shared;
  const po::options_description all = train_options(options, shared);

  const std::vector<std::string> args = cli::arguments_every_rank_shares(world, argc, argv, 1);
  std::string json;
  const cli::Parsed parsed = world.collective_try([&] {
    cli::Parsed result = cli::parse(args, all, usage);
    if (result.help) return result;
    shared.apply(result.values, config.loader);
    json = json_path(world, options);
    if (world.is_root() && !json.empty() && !cli::json_to_stdout(json))
      check_output_path(json, options.stats_json.empty() ? "--json" : "--stats-json");
    config.progress_seconds = world.is_root() ? cli::progress_interval(result.values, options.progress) : 0.0;
    return result;
  });
  if (parsed.help) return 0;
  config.setting_names = flag_of_setting;

  const TrainSummary summary = train(world, config);
  if (!json.empty())
    world.collective_try([&] {
      if (!world.is_root()) return;
      cli::JsonOutput out(json);
      write_train_stats_json(out.stream(), summary);
      out.finish();
    });
  return summary.preempted ? exit_code_preempted : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& world) { return train_main(world, argc, argv); });
}
