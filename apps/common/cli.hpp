#pragma once
// Command-line helpers shared by the apps: Boost.Program_options with --help, --config FILE, and
// errors turned into strider::UsageError (one line, exit 2).

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "strider/io/batch_reader.hpp"
#include "strider/sampling/factory.hpp"

namespace strider::cli {

namespace po = boost::program_options;

/// Result of parse(): the values, and whether --help was asked for (usage already printed).
struct Parsed {
  po::variables_map values;
  bool help = false;
};

/// Parses args (argv without the program and subcommand names) against `options`, plus --help and
/// --config FILE (an INI-style file of the same long options, "name = value"; the command line wins).
/// `positional` names options taken from bare arguments. `usage` is the first line of --help.
/// Any parse error throws UsageError naming the option.
Parsed parse(const std::vector<std::string>& args, const po::options_description& options, const std::string& usage,
             const po::positional_options_description* positional = nullptr);

/// argv[first..argc) as strings.
std::vector<std::string> arguments(int argc, char** argv, int first);

/// The sampler options common to strider-inspect, -train and -bench (--sampler, --seed,
/// --batch-size, --no-shuffle, --drop-last, --drop-last-batch). `seed` may be left unset by the user:
/// see seed_given().
void add_sampler_options(po::options_description& options, SamplerOptions& sampler);
/// Fills the parts of SamplerOptions that need checks after parsing (flags); throws UsageError.
void finish_sampler_options(const po::variables_map& values, SamplerOptions& sampler);

/// The dataset names every app that reads or writes a dataset shares (--data-key, --label-key,
/// --tokens-key, --offsets-key, defaults as in DatasetKeys) and, when `engine` is not null, --engine.
void add_dataset_options(po::options_description& options, DatasetKeys& keys, std::string* engine = nullptr);

/// Parses "1,2,3" into integers; throws UsageError naming `option`.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& option);
/// Parses "0.5,1,2" into doubles; throws UsageError naming `option`.
std::vector<double> parse_double_list(const std::string& text, const std::string& option);

}  // namespace strider::cli
