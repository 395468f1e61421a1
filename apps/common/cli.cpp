#include "common/cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "strider/core/error.hpp"
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
