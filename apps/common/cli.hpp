#pragma once
// Command-line helpers shared by the apps: Boost.Program_options with --help, --version, --config
// FILE, `--json [PATH]`, defaults shown as written, and errors turned into strider::UsageError (one
// line, exit 2).

#include <boost/program_options.hpp>
#include <iosfwd>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/core/option_text.hpp"
#include "strider/core/progress.hpp"
#include "strider/pipeline/loader_options.hpp"

namespace strider::cli {

namespace po = boost::program_options;

/// Result of parse(): the values, and whether --help or --version was asked for (already printed:
/// the app exits 0).
struct Parsed {
  po::variables_map values;
  bool help = false;
};

/// Parses args (argv without the program and subcommand names) against `options`, plus --help,
/// --version and --config FILE (an INI-style file of the same long options, "name = value"; the
/// command line wins). `positional` names options taken from bare arguments. `usage` is the first
/// line of --help. Any parse error throws UsageError naming the option.
///
/// An option added with json_option() takes an optional PATH: `--json=PATH`, or `--json PATH` where
/// PATH is not an option and not the app's positional input (`info --json f.h5` reads f.h5 and
/// prints JSON; `info f.h5 --json out.json` writes out.json).
Parsed parse(const std::vector<std::string>& args, const po::options_description& options, const std::string& usage,
             const po::positional_options_description* positional = nullptr);

/// What --version prints: the app, strider's version and commit, and the CUDA, NCCL, HDF5, MPI and
/// compiler it was built with.
std::string version_text(const std::string& program);

/// The typed value of a number option whose default --help shows as written (0.1, not 0.100000001).
template <typename Number>
po::typed_value<Number>* number(Number* target, Number default_value);

/// `--json [PATH]` bound to `path`: no value or "-" is stdout ("-" in `path`). `help` says what is
/// written.
void json_option(po::options_description& description, std::string* path, const std::string& help,
                 const char* name = "json");

/// `--progress [SECONDS]` and `--no-progress` (strider/core/progress.hpp).
struct ProgressSetting {
  double seconds = 0.0;
  bool disabled = false;
};
void progress_options(po::options_description& description, ProgressSetting& setting);
/// The interval the parsed options ask for (0: none; on a terminal by default); throws UsageError
/// for both options or a non-positive interval.
double progress_interval(const po::variables_map& values, const ProgressSetting& setting);

/// Where `--json` writes: stdout for "-" (print_on_root's lines then go to stderr, so that stdout
/// holds the JSON alone), else the file. Throws SystemError naming the path when it cannot be opened.
class JsonOutput {
 public:
  explicit JsonOutput(const std::string& path);
  std::ostream& stream();
  /// Throws SystemError when writing failed (a full disk).
  void finish();

 private:
  std::string path_;
  std::unique_ptr<std::ostream> file_;
};

/// A report whose format `--json` chose: `text` (the JSON, or the lines people read when `json_path`
/// is empty) on stdout, or in the file `json_path` names.
void write_report(const std::string& json_path, const std::string& text);

/// True when `--json` writes to stdout.
inline bool json_to_stdout(const std::string& path) {
  return path == "-";
}

/// argv[first..argc) as strings.
std::vector<std::string> arguments(int argc, char** argv, int first);

/// Collective: argv[first..argc) as strings, the same on every rank: a rank started with other
/// arguments (an MPMD launch, a per-rank variable in a script) ends every rank with UsageError naming
/// both command lines, before any option can send the ranks down different collective paths.
std::vector<std::string> arguments_every_rank_shares(const Communicator& world, int argc, char** argv, int first);

/// An app's options in the groups every app's --help shows, in this order: Input, Sampling, Pipeline,
/// Store, Output, Diagnostics. all() holds the groups that have options (General is parse()'s).
struct HelpGroups {
  po::options_description input{"Input"};
  po::options_description sampling{"Sampling"};
  po::options_description pipeline{"Pipeline"};
  po::options_description store{"Store"};
  po::options_description output{"Output"};
  po::options_description diagnostics{"Diagnostics"};
  po::options_description all() const;
};

/// The names of the shared option table's group ("data", "sampling", "pipeline", "store" or
/// "diagnostics"; see strider/pipeline/loader_options.hpp), in table order, without those in
/// `except`.
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

template <typename Number>
po::typed_value<Number>* number(Number* target, Number default_value) {
  return po::value<Number>(target)->default_value(default_value, format_number(default_value));
}

}  // namespace strider::cli
