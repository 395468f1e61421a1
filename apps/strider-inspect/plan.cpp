// strider-inspect plan: a sampler's plan for one rank or all ranks, as text or JSON. The contract
// (options, output) is relied on by scripts and other tools: change it only compatibly.

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

#include "common/cli.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/json_writer.hpp"
#include "strider/core/option_text.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/sampling/plan_stats.hpp"
#include "strider/sampling/synthetic_lengths.hpp"
#include "subcommands.hpp"

namespace strider::inspect {
namespace {

struct PlanOptions {
  SamplerOptions sampler;
  std::int64_t samples = -1;
  int world = 1;
  int rank = 0;
  std::int64_t epoch = 0;
  std::int64_t first_step = 0;
  std::int64_t steps = -1;  // -1: to the end of the epoch
  bool all_ranks = false;
  std::string json;          // --json [PATH]: empty, none; "-", stdout
  std::string lengths_spec;  // --lengths: synthetic per-sample lengths (bucketed)
  bool stats = false;        // --stats: padding efficiency and step imbalance instead of the plan
  std::string class_counts;  // --class-counts: labels in blocks (class-aware modes)
  bool histogram = false;    // --histogram: per rank, the count of each class instead of the plan
  std::string data_path;     // --data: labels (and N) from a dataset file, read collectively (MPI)
  ReaderOptions reader;      // --label-key etc. for --data
};

struct RankPlan {
  int rank = 0;
  std::vector<std::vector<std::int64_t>> batches;
};

RankPlan plan_for_rank(const PlanOptions& options, int rank) {
  std::unique_ptr<Sampler> sampler = make_sampler(options.sampler, options.world, rank);
  sampler->set_epoch(options.epoch);
  RankPlan plan{rank, {}};
  const std::int64_t end =
      options.steps < 0 ? sampler->num_steps() : std::min(sampler->num_steps(), options.first_step + options.steps);
  for (std::int64_t step = options.first_step; step < end; ++step) {
    plan.batches.emplace_back();
    sampler->batch(step, plan.batches.back());
  }
  return plan;
}

// The count of each class (0..K-1) in a rank's plan.
std::vector<std::int64_t> class_counts_of(const PlanOptions& options, const RankPlan& plan) {
  const SharedView<std::int32_t>& labels = options.sampler.labels;
  std::int32_t classes = 0;
  for (std::int32_t label : labels) classes = std::max(classes, label + 1);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(classes), 0);
  for (const auto& batch : plan.batches)
    for (std::int64_t index : batch) ++counts[static_cast<std::size_t>(labels[static_cast<std::size_t>(index)])];
  return counts;
}

void write_json(JsonWriter& json, const PlanOptions& options, const RankPlan& plan) {
  json.begin_object();
  json.field("rank", plan.rank);
  json.field("world", options.world);
  json.field("epoch", options.epoch);
  json.key("indices");
  json.begin_array();
  for (const auto& batch : plan.batches)
    for (std::int64_t index : batch) json.value(index);
  json.end_array();
  json.key("batches");
  json.begin_array();
  for (const auto& batch : plan.batches) json.array(batch);
  json.end_array();
  if (options.sampler.labels) {  // class-aware: each index's label, and this rank's count per class
    const SharedView<std::int32_t>& labels = options.sampler.labels;
    json.key("labels");
    json.begin_array();
    for (const auto& batch : plan.batches)
      for (std::int64_t index : batch) json.value(static_cast<std::int64_t>(labels[static_cast<std::size_t>(index)]));
    json.end_array();
    json.key("class_counts");
    json.array(class_counts_of(options, plan));
  }
  json.end_object();
}

void write_text(std::ostream& out, const RankPlan& plan, bool with_rank) {
  if (with_rank) out << "rank " << plan.rank << ":";
  bool first = !with_rank;
  for (const auto& batch : plan.batches) {
    for (std::int64_t index : batch) {
      if (!first) out << ' ';
      out << index;
      first = false;
    }
  }
  out << '\n';
}

// --stats: the plan's padding and balance over every rank; for bucketed, also fixed-size random
// batches of the same mean size (the distributed sampler) for comparison.
void write_stats(std::ostream& out, const PlanOptions& options) {
  const PlanStats stats = plan_stats(options.sampler, options.world, options.epoch);
  JsonWriter json(out);
  json.begin_object();
  json.field("padding_efficiency", stats.padding_efficiency);
  json.field("step_imbalance", stats.step_imbalance);
  json.field("worst_step_imbalance", stats.worst_step_imbalance);
  json.field("steps", stats.steps);
  json.field("mean_batch_size", stats.mean_batch_size);
  if (options.sampler.mode == "bucketed" && stats.mean_batch_size > 0) {
    SamplerOptions fixed = options.sampler;
    fixed.mode = "distributed";
    fixed.batch_size = std::max<std::int64_t>(1, std::llround(stats.mean_batch_size));
    const PlanStats random = plan_stats(fixed, options.world, options.epoch);
    json.field("random_batch_size", fixed.batch_size);
    json.field("random_padding_efficiency", random.padding_efficiency);
    json.field("random_step_imbalance", random.step_imbalance);
  }
  json.end_object();
  out << '\n';
}

// --data: opens the file (collective over world) and takes N, the labels and sequence lengths from it.
void load_data(const Communicator& world, const cli::Parsed& parsed, PlanOptions& options) {
  if (!options.class_counts.empty()) STRIDER_THROW(UsageError, "--data and --class-counts exclude each other");
  options.reader.require_labels = sampler_needs_labels(options.sampler.mode);
  options.reader.labels_needed_by = "the " + options.sampler.mode + " sampler";
  const std::unique_ptr<BatchReader> reader = open_reader(world, options.data_path, options.reader);
  const std::int64_t samples = reader->info().num_samples;
  world.collective_try([&] {
    if (parsed.values.count("samples") && options.samples != samples)
      STRIDER_THROW(UsageError, "--samples " + std::to_string(options.samples) + " differs from the " +
                                    std::to_string(samples) + " samples of " + options.data_path);
  });
  options.samples = samples;
  if (!reader->labels().empty())
    options.sampler.labels = std::make_shared<const std::vector<std::int32_t>>(reader->labels().to_vector());
  if (!reader->lengths().empty())  // sequences: the bucketed sampler's lengths (--lengths overrides)
    options.sampler.lengths = std::make_shared<const std::vector<std::int64_t>>(reader->lengths().to_vector());
}

// Everything after parsing: the plan (or histogram, or stats) as text.
std::string plan_text(const cli::Parsed& parsed, PlanOptions& options);

int plan_main(int argc, char** argv, const Communicator* world) {
  PlanOptions options;
  cli::HelpGroups groups;
  groups.input.add_options()(
      "data", cli::po::value<std::string>(&options.data_path),
      "take N and the labels from this dataset file (runs under MPI; any rank count prints once)")(
      "samples", cli::po::value<std::int64_t>(&options.samples),
      "N, the number of samples in the dataset (required without --class-counts)")(
      "class-counts", cli::po::value<std::string>(&options.class_counts),
      "labels in blocks, e.g. 10000,200,50: the first 10000 indices are class 0, the next 200 class 1, ...")(
      "lengths", cli::po::value<std::string>(&options.lengths_spec),
      "synthetic per-sample lengths from the seed, e.g. lognormal:median=128,min=8,max=2048[,sigma=1] or "
      "uniform:min=8,max=2048");
  cli::SharedOptions shared;
  shared.add(groups.input, {"data-key", "label-key", "tokens-key", "offsets-key"});
  groups.sampling.add_options()("world", cli::po::value<int>(&options.world)->default_value(1),
                                "R, the number of ranks")("rank", cli::po::value<int>(&options.rank)->default_value(0),
                                                          "the rank to print (0..R-1)")(
      "epoch", cli::po::value<std::int64_t>(&options.epoch)->default_value(0), "the epoch");
  shared.add(groups.sampling, cli::loader_option_names("sampling"), {{"seed", "0"}});
  groups.output.add_options()("first-step", cli::po::value<std::int64_t>(&options.first_step)->default_value(0),
                              "first step to print")("steps", cli::po::value<std::int64_t>(&options.steps),
                                                     "number of steps to print (default: to the end of the epoch)")(
      "all-ranks", cli::po::bool_switch(&options.all_ranks), "print every rank, one line each ('rank r: ...')")(
      "stats", cli::po::bool_switch(&options.stats),
      "print {\"padding_efficiency\", \"step_imbalance\", ...} over every rank instead of the plan (needs --lengths)")(
      "histogram", cli::po::bool_switch(&options.histogram),
      "print every rank's count of each class ('rank r: n0 n1 ...') instead of the plan (needs labels)");
  cli::json_option(groups.output, &options.json,
                   "print JSON: {\"rank\", \"world\", \"epoch\", \"indices\", \"batches\"}");
  const auto parse = [&] {
    cli::Parsed parsed =
        cli::parse(cli::arguments(argc, argv, 2), groups.all(),
                   "usage: strider-inspect plan --samples N [--world R --rank r --seed S --epoch E] [--batch-size B] "
                   "[--json [PATH]]\n"
                   "Prints rank r's sample indices in order, separated by spaces, on one line. Needs no MPI launcher\n"
                   "(but with --data FILE).");
    if (parsed.help) return parsed;
    LoaderOptions shared_values;
    shared.apply(parsed.values, shared_values);
    options.reader.keys = shared_values.reader.keys;
    options.sampler = shared_values.sampler;
    options.sampler.seed = shared_values.seed.value_or(0);
    return parsed;
  };
  const cli::Parsed parsed = world != nullptr ? world->collective_try(parse) : parse();
  if (parsed.help) return 0;
  if (!options.data_path.empty()) {
    if (world == nullptr) STRIDER_THROW(UsageError, "--data must be given on the command line (it needs MPI)");
    load_data(*world, parsed, options);
  }
  const std::string text =
      world != nullptr ? world->collective_try([&] { return plan_text(parsed, options); }) : plan_text(parsed, options);
  if (world == nullptr || world->is_root()) cli::write_report(options.json, text);
  return 0;
}

std::string plan_text(const cli::Parsed& parsed, PlanOptions& options) {
  if (!options.class_counts.empty()) {
    options.sampler.labels = std::make_shared<const std::vector<std::int32_t>>(
        labels_from_class_counts(parse_integer_list(options.class_counts, "class-counts")));
    const auto labelled = static_cast<std::int64_t>(options.sampler.labels.size());
    if (parsed.values.count("samples") && options.samples != labelled)
      STRIDER_THROW(UsageError, "--samples " + std::to_string(options.samples) + " differs from the " +
                                    std::to_string(labelled) + " samples of --class-counts");
    options.samples = labelled;
  }
  if (!parsed.values.count("samples") && !options.sampler.labels && options.data_path.empty())
    STRIDER_THROW(UsageError, "the option '--samples' is required (or --class-counts or --data)");
  if (options.histogram && !options.sampler.labels)
    STRIDER_THROW(UsageError, "--histogram needs labels: --class-counts or --data with labels");
  if (options.samples < 0) STRIDER_THROW(UsageError, "--samples must be >= 0, got " + std::to_string(options.samples));
  if (options.world <= 0) STRIDER_THROW(UsageError, "--world must be positive, got " + std::to_string(options.world));
  if (options.rank < 0 || options.rank >= options.world)
    STRIDER_THROW(UsageError,
                  "--rank " + std::to_string(options.rank) + " is outside [0, " + std::to_string(options.world) + ")");
  if (options.epoch < 0) STRIDER_THROW(UsageError, "--epoch must be >= 0, got " + std::to_string(options.epoch));
  if (options.first_step < 0) STRIDER_THROW(UsageError, "--first-step must be >= 0");
  if (parsed.values.count("steps") && options.steps < 0) STRIDER_THROW(UsageError, "--steps must be >= 0");
  options.sampler.dataset_size = options.samples;
  if (!options.lengths_spec.empty())
    options.sampler.lengths = std::make_shared<const std::vector<std::int64_t>>(
        synthetic_lengths(options.lengths_spec, options.samples, options.sampler.seed));
  if (options.sampler.mode == "bucketed" && !options.sampler.lengths)
    STRIDER_THROW(UsageError, "--sampler bucketed needs per-sample lengths: --lengths SPEC or --data with sequences");
  if (options.stats) {
    if (!options.sampler.lengths)
      STRIDER_THROW(UsageError, "--stats needs per-sample lengths: --lengths SPEC or --data with sequences");
    std::ostringstream out;
    write_stats(out, options);
    return out.str();
  }

  std::vector<RankPlan> plans;
  if (options.all_ranks || options.histogram) {
    for (int rank = 0; rank < options.world; ++rank) plans.push_back(plan_for_rank(options, rank));
  } else {
    plans.push_back(plan_for_rank(options, options.rank));
  }

  std::ostringstream out;
  if (options.histogram) {
    for (const RankPlan& plan : plans) {
      out << "rank " << plan.rank << ":";
      for (std::int64_t count : class_counts_of(options, plan)) out << ' ' << count;
      out << '\n';
    }
  } else if (!options.json.empty()) {
    JsonWriter json(out);
    if (options.all_ranks) json.begin_array();
    for (const RankPlan& plan : plans) write_json(json, options, plan);
    if (options.all_ranks) json.end_array();
    out << '\n';
  } else {
    for (const RankPlan& plan : plans) write_text(out, plan, options.all_ranks);
  }
  return out.str();
}

}  // namespace

int run_plan(int argc, char** argv) {
  // Only --data needs MPI (a collective open); without it the plan runs without a launcher.
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--data" || arg.rfind("--data=", 0) == 0)
      return run_mpi_app(argc, argv, [&](Communicator& world) { return plan_main(argc, argv, &world); });
  }
  return run_app_without_mpi([&] { return plan_main(argc, argv, nullptr); });
}

}  // namespace strider::inspect
