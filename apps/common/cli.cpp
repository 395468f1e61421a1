#include "common/cli.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "strider/core/error.hpp"

namespace strider::cli {

std::vector<std::string> arguments(int argc, char** argv, int first) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.emplace_back(argv[i]);
  return args;
}

Parsed parse(const std::vector<std::string>& args, const po::options_description& options, const std::string& usage,
             const po::positional_options_description* positional) {
  po::options_description all;
  po::options_description general("General");
  general.add_options()("help,h", "print this help and exit")("config", po::value<std::string>(),
                                                              "read further options from FILE (lines 'name = value')");
  all.add(options).add(general);

  Parsed parsed;
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional != nullptr) parser.positional(*positional);
    po::store(parser.run(), parsed.values);
    if (parsed.values.count("help")) {
      std::cout << usage << "\n\n" << all << std::endl;
      parsed.help = true;
      return parsed;
    }
    if (parsed.values.count("config")) {
      const std::string path = parsed.values["config"].as<std::string>();
      std::ifstream file(path);
      if (!file) STRIDER_THROW(UsageError, "cannot open the config file '" + path + "'");
      po::store(po::parse_config_file(file, options), parsed.values);
    }
    po::notify(parsed.values);
  } catch (const po::error& error) {
    STRIDER_THROW(UsageError, std::string(error.what()) + " (see --help)");
  }
  return parsed;
}

void add_sampler_options(po::options_description& options, SamplerOptions& sampler) {
  std::string modes;
  for (const std::string& mode : sampler_modes()) modes += (modes.empty() ? "" : "|") + mode;
  options.add_options()("sampler", po::value<std::string>(&sampler.mode)->default_value(sampler.mode),
                        ("sampling mode: " + modes).c_str())(
      "batch-size", po::value<std::int64_t>(&sampler.batch_size)->default_value(sampler.batch_size),
      "samples per rank per step (0: the whole epoch is one batch)")("no-shuffle", po::bool_switch(),
                                                                     "keep the dataset order (torch's shuffle=False)")(
      "drop-last", po::bool_switch(&sampler.drop_last),
      "drop the tail so every rank gets floor(N/R) samples (torch's drop_last)")(
      "drop-last-batch", po::bool_switch(&sampler.drop_last_batch), "drop a last partial batch");
  options.add_options()  // class-aware modes (balanced, weighted, stratified)
      ("class-weights", po::value<std::string>(),
       "weighted: w0,w1,... one weight per class; each sample of class c weighs w_c (default 1/count_c)")(
          "balance", po::value<std::string>(&sampler.balance)->default_value(sampler.balance),
          "balanced: samples per class per epoch: max (oversample), min (undersample) or a count")(
          "stratify-target", po::value<std::string>(&sampler.stratify_target)->default_value(sampler.stratify_target),
          "stratified: class proportions of every batch: freq, uniform or w0,w1,...")(
          "num-samples", po::value<std::int64_t>(&sampler.num_samples)->default_value(sampler.num_samples),
          "weighted, stratified: samples per epoch over all ranks (0: the dataset size)");
  options.add_options()  // length-bucketed and block modes
      ("max-tokens", po::value<std::int64_t>(&sampler.max_tokens)->default_value(sampler.max_tokens),
       "bucketed: token budget per batch, count x longest length")(
          "max-batch-size", po::value<std::int64_t>(&sampler.max_batch_size)->default_value(sampler.max_batch_size),
          "bucketed: at most this many samples per batch (0: no limit)")(
          "batch-size-multiple",
          po::value<std::int64_t>(&sampler.batch_size_multiple)->default_value(sampler.batch_size_multiple),
          "bucketed: samples per batch are a multiple of this (but the epoch's last batch)")(
          "megabatch", po::value<std::int64_t>(&sampler.megabatch)->default_value(sampler.megabatch),
          "bucketed: sort lengths within windows of this many batches' worth of tokens (0: the whole epoch)")(
          "step-group", po::value<std::int64_t>(&sampler.step_group)->default_value(sampler.step_group),
          "bucketed: sort batches by cost within groups of this many, so a step's ranks cost alike")(
          "most-expensive-first", po::bool_switch(&sampler.most_expensive_first),
          "bucketed: run the costliest batch at step 0 (memory failures show at once)")(
          "block-size", po::value<std::int64_t>(&sampler.block_size)->default_value(sampler.block_size),
          "block: contiguous samples per block")(
          "block-window", po::value<std::int64_t>(&sampler.block_window)->default_value(sampler.block_window),
          "block: a rank's samples are shuffled within windows of this many blocks");
}

void finish_sampler_options(const po::variables_map& values, SamplerOptions& sampler) {
  sampler.shuffle = !(values.count("no-shuffle") && values["no-shuffle"].as<bool>());
  if (sampler.batch_size < 0)
    STRIDER_THROW(UsageError, "--batch-size must be >= 0, got " + std::to_string(sampler.batch_size));
  if (values.count("class-weights"))
    sampler.class_weights = parse_double_list(values["class-weights"].as<std::string>(), "class-weights");
  if (sampler.num_samples < 0)
    STRIDER_THROW(UsageError, "--num-samples must be >= 0, got " + std::to_string(sampler.num_samples));
}

void add_dataset_options(po::options_description& options, DatasetKeys& keys, std::string* engine) {
  options.add_options()("data-key", po::value<std::string>(&keys.data)->default_value(keys.data),
                        "dataset of fixed-size samples [N, ...]")(
      "label-key", po::value<std::string>(&keys.labels)->default_value(keys.labels), "dataset of integer labels [N]")(
      "tokens-key", po::value<std::string>(&keys.tokens)->default_value(keys.tokens),
      "sequences: dataset of all tokens [T]")("offsets-key",
                                              po::value<std::string>(&keys.offsets)->default_value(keys.offsets),
                                              "sequences: int64 [N+1], row i is tokens[offsets[i]:offsets[i+1]]");
  if (engine != nullptr)
    options.add_options()(
        "engine", po::value<std::string>(engine)->default_value(*engine),
        "reader engine: auto | hdf5 | direct | mmap (auto: mmap for contiguous native data, else hdf5)");
}

namespace {
template <typename T, typename Convert>
std::vector<T> parse_list(const std::string& text, const std::string& option, Convert convert) {
  std::vector<T> values;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    std::size_t used = 0;
    try {
      values.push_back(convert(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      STRIDER_THROW(UsageError, "--" + option + ": '" + item + "' is not a number (expected a comma-separated list)");
    begin = end + 1;
  }
  return values;
}
}  // namespace

std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& option) {
  return parse_list<std::int64_t>(text, option, [](const std::string& item, std::size_t* used) {
    return static_cast<std::int64_t>(std::stoll(item, used));
  });
}

std::vector<double> parse_double_list(const std::string& text, const std::string& option) {
  return parse_list<double>(text, option,
                            [](const std::string& item, std::size_t* used) { return std::stod(item, used); });
}

}  // namespace strider::cli
