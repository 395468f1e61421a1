#include "common/cli.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"

namespace strider::cli {

std::vector<std::string> arguments(int argc, char** argv, int first) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.emplace_back(argv[i]);
  return args;
}

std::vector<std::string> arguments_every_rank_shares(const Communicator& world, int argc, char** argv, int first) {
  std::vector<std::string> args = arguments(argc, argv, first);
  std::string command_line;
  for (const std::string& arg : args) command_line += (command_line.empty() ? "" : " ") + arg;
  world.require_same_values({{"the command line", command_line}}, "every rank must be given the same options");
  return args;
}

namespace {

/// The options with an optional value (json_option, progress_options) and the text of their value
/// when given alone. Boost would take the next bare token as their value, so parse() writes it out.
std::map<std::string, std::string>& implicit_values() {
  static std::map<std::string, std::string> values;
  return values;
}

bool is_bare(const std::string& token) {
  return token == "-" || token.empty() || token[0] != '-';
}

/// Rewrites each option with an optional value (`--json`, `--progress`) followed by its value into
/// `--json=PATH`, so that Boost never has to guess: the token after it is its value when it is not an
/// option and not needed as the app's positional input (more bare tokens than the positional takes,
/// the input given as `--NAME` too, or "-"). Alone, it is written with its implicit value.
std::vector<std::string> attach_optional_values(const std::vector<std::string>& args,
                                                const po::options_description& all,
                                                const po::positional_options_description* positional) {
  std::vector<std::string> out;
  std::vector<std::size_t> candidates;   // indices in `out` of bare tokens that may be a --json's PATH
  std::vector<std::size_t> optional_at;  // indices in `out` of the options with an optional value
  std::size_t bare = 0;
  bool input_named = false;
  const std::string input =
      positional != nullptr && positional->max_total_count() > 0 ? positional->name_for_position(0) : std::string();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    out.push_back(token);
    if (token == "--") {  // everything after it is positional
      for (++i; i < args.size(); ++i, ++bare) out.push_back(args[i]);
      break;
    }
    if (token.rfind("--", 0) != 0 || token.find('=') != std::string::npos) {
      if (is_bare(token)) ++bare;
      if (token.rfind("--", 0) == 0 && token.substr(2, token.find('=') - 2) == input) input_named = true;
      continue;
    }
    const std::string name = token.substr(2);
    if (!input.empty() && name == input) input_named = true;
    const po::option_description* option = all.find_nothrow(name, false);
    if (option == nullptr || option->semantic()->max_tokens() == 0) continue;
    if (option->semantic()->min_tokens() == 0) {  // an optional value
      optional_at.push_back(out.size() - 1);
      if (i + 1 < args.size() && is_bare(args[i + 1])) {
        out.push_back(args[++i]);
        candidates.push_back(out.size() - 1);
        ++bare;
      }
      continue;
    }
    if (i + 1 < args.size()) out.push_back(args[++i]);  // its value
  }
  std::size_t capacity = positional == nullptr ? 0 : positional->max_total_count();
  if (capacity != 0 && capacity != UINT_MAX && input_named) --capacity;
  std::vector<bool> taken(out.size(), false);
  for (std::size_t at : candidates) {
    if (out[at] == "-" || bare > capacity) {
      taken[at] = true;
      --bare;
    }
  }
  std::vector<std::string> result;
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (std::find(optional_at.begin(), optional_at.end(), k) != optional_at.end()) {
      const bool with_value = k + 1 < out.size() && taken[k + 1];
      const auto implicit = implicit_values().find(out[k].substr(2));
      result.push_back(out[k] + "=" +
                       (with_value                            ? out[k + 1]
                        : implicit != implicit_values().end() ? implicit->second
                                                              : std::string()));
      if (with_value) ++k;
      continue;
    }
    result.push_back(out[k]);
  }
  return result;
}

}  // namespace

Parsed parse(const std::vector<std::string>& args, const po::options_description& options, const std::string& usage,
             const po::positional_options_description* positional) {
  po::options_description all;
  po::options_description general("General");
  general.add_options()("help,h", "print this help and exit")("version",
                                                              "print the version and what it was built "
                                                              "with, and exit")(
      "config", po::value<std::string>(), "read further options from FILE (lines 'name = value')");
  all.add(options).add(general);

  Parsed parsed;
  try {
    po::command_line_parser parser(attach_optional_values(args, all, positional));
    parser.options(all);
    if (positional != nullptr) parser.positional(*positional);
    po::store(parser.run(), parsed.values);
    if (parsed.values.count("help")) {
      // Grouped options print a blank line before each group: one between blocks is enough.
      std::ostringstream help;
      help << usage << "\n\n" << all;
      std::string text = help.str();
      for (std::size_t at; (at = text.find("\n\n\n")) != std::string::npos;) text.erase(at, 1);
      std::cout << text << std::endl;
      parsed.help = true;
      return parsed;
    }
    if (parsed.values.count("version")) {
      std::cout << version_text(program_invocation_short_name) << std::flush;
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
  } catch (const po::unknown_option& error) {
    // A mistyped option gets the nearest known name.
    std::vector<std::string> names;
    for (const auto& option : all.options()) names.push_back(option->long_name());
    std::string given = error.get_option_name();
    const std::string bare_name = given.substr(given.find_first_not_of('-'));
    const std::string near = nearest_name(bare_name.substr(0, bare_name.find('=')), names);
    STRIDER_THROW(UsageError, std::string(error.what()) + (near.empty() ? "" : "; did you mean '--" + near + "'?") +
                                  " (see --help)");
  } catch (const po::error& error) {
    STRIDER_THROW(UsageError, std::string(error.what()) + " (see --help)");
  }
  return parsed;
}

po::options_description HelpGroups::all() const {
  po::options_description groups;
  for (const po::options_description* group : {&input, &sampling, &pipeline, &store, &output, &diagnostics})
    if (!group->options().empty()) groups.add(*group);
  return groups;
}

void json_option(po::options_description& description, std::string* path, const std::string& help, const char* name) {
  // JSON on stdout: the lines people read move to stderr before the first is printed.
  const auto to_stdout = [](const std::string& value) {
    if (json_to_stdout(value)) reports_to_stderr();
  };
  implicit_values()[name] = "-";
  description.add_options()(name,
                            po::value<std::string>(path)->implicit_value("-")->value_name("PATH")->notifier(to_stdout),
                            (help + " (no PATH, or '-': stdout)").c_str());
}

void progress_options(po::options_description& description, ProgressSetting& setting) {
  implicit_values()["progress"] = "5";
  description.add_options()("progress", po::value<double>(&setting.seconds)->implicit_value(5.0)->value_name("SECONDS"),
                            "rank 0 prints a progress line (step, epoch, samples/s, stall, ETA) on stderr every "
                            "SECONDS (no value: 5); on by default when stderr is a terminal")(
      "no-progress", po::bool_switch(&setting.disabled), "no progress line, even on a terminal");
}

double progress_interval(const po::variables_map& values, const ProgressSetting& setting) {
  return strider::progress_interval(values.count("progress") > 0, setting.seconds, setting.disabled);
}

void write_report(const std::string& json_path, const std::string& text) {
  JsonOutput out(json_path.empty() ? "-" : json_path);
  out.stream() << text;
  out.finish();
}

JsonOutput::JsonOutput(const std::string& path) : path_(path) {
  if (json_to_stdout(path)) return;
  auto file = std::make_unique<std::ofstream>(path);
  if (!*file) STRIDER_THROW(SystemError, "cannot write the JSON file '" + path + "': " + std::strerror(errno));
  file_ = std::move(file);
}

std::ostream& JsonOutput::stream() {
  return file_ ? *file_ : std::cout;
}

void JsonOutput::finish() {
  stream() << std::flush;
  if (!stream()) STRIDER_THROW(SystemError, "failed writing the JSON to '" + path_ + "'");
}

std::vector<std::string> loader_option_names(const std::string& group, const std::vector<std::string>& except) {
  std::vector<std::string> names;
  for (const LoaderOption& option : loader_option_table())
    if (option.group == group && std::find(except.begin(), except.end(), option.name) == except.end())
      names.push_back(option.name);
  return names;
}

void SharedOptions::add(po::options_description& description, const std::vector<std::string>& names,
                        const std::map<std::string, std::string>& defaults, const std::set<std::string>& required) {
  for (const std::string& name : names) {
    const LoaderOption& option = loader_option(name);
    const auto app_default = defaults.find(name);
    const std::string default_text = app_default != defaults.end() ? app_default->second : option.default_text;
    const bool has_default = !default_text.empty();
    const bool is_required = required.count(name) > 0;
    po::value_semantic* semantic = nullptr;
    switch (option.type) {
      case OptionType::flag:
        semantic = po::bool_switch();  // off unless given
        break;
      case OptionType::int32: {
        auto* value = po::value<int>();
        if (has_default) value->default_value(parse_int_option(default_text, name), default_text);
        if (is_required) value->required();
        semantic = value;
        break;
      }
      case OptionType::int64: {
        auto* value = po::value<std::int64_t>();
        if (has_default) value->default_value(parse_integer_option(default_text, name), default_text);
        if (is_required) value->required();
        semantic = value;
        break;
      }
      case OptionType::text: {
        auto* value = po::value<std::string>();
        if (has_default) value->default_value(default_text);
        if (is_required) value->required();
        semantic = value;
        break;
      }
    }
    description.add_options()(name.c_str(), semantic, option.help.c_str());
    added_.push_back(name);
  }
}

void SharedOptions::apply(const po::variables_map& values, LoaderOptions& options) const {
  for (const std::string& name : added_) {
    if (!values.count(name)) continue;
    const LoaderOption& option = loader_option(name);
    const po::variable_value& value = values[name];
    switch (option.type) {
      case OptionType::flag:
        option.set(options, value.as<bool>() ? "true" : "false");
        break;
      case OptionType::int32:
        option.set(options, std::to_string(value.as<int>()));
        break;
      case OptionType::int64:
        option.set(options, std::to_string(value.as<std::int64_t>()));
        break;
      case OptionType::text:
        option.set(options, value.as<std::string>());
        break;
    }
  }
}

}  // namespace strider::cli
