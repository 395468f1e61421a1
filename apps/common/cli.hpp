#pragma once
// Command-line helpers shared by the apps: Boost.Program_options with --help, --config FILE, and
// errors turned into strider::UsageError (one line, exit 2).

#include <boost/program_options.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/pipeline/loader_options.hpp"

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

/// Collective: argv[first..argc) as strings, the same on every rank: a rank started with other
/// arguments (an MPMD launch, a per-rank variable in a script) ends every rank with UsageError naming
/// both command lines, before any option can send the ranks down different collective paths.
std::vector<std::string> arguments_every_rank_shares(const Communicator& world, int argc, char** argv, int first);

/// The names of the shared option table's group ("data", "sampling" or "pipeline"; see
/// strider/pipeline/loader_options.hpp), in table order, without those in `except`.
std::vector<std::string> loader_option_names(const std::string& group, const std::vector<std::string>& except = {});

/// Options of the shared table on an app's command line: add() them to a description (each with
/// the table's type, so that Boost's parsing and messages apply, its help and its default), parse,
/// then apply() the parsed values onto LoaderOptions through the table's setters.
class SharedOptions {
 public:
  /// Adds the table's options `names` in that order. `defaults` (name -> text) replaces the table's
  /// default where this app's differs; `required` names options the app cannot run without.
  void add(po::options_description& description, const std::vector<std::string>& names,
           const std::map<std::string, std::string>& defaults = {}, const std::set<std::string>& required = {});
  /// Sets every added option that `values` holds (given, or defaulted) on `options`; a bad value
  /// throws UsageError naming the option.
  void apply(const po::variables_map& values, LoaderOptions& options) const;

 private:
  std::vector<std::string> added_;
};

}  // namespace strider::cli
