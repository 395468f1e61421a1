#include "file_options.hpp"

namespace strider::inspect {

cli::Parsed parse_file_command(const Communicator& world, int argc, char** argv, cli::HelpGroups& groups,
                               const std::string& usage, std::string& path, ReaderOptions& reader_options,
                               const std::function<void(const cli::Parsed&)>& finish) {
  return world.collective_try([&] {
    groups.input.add_options()("data", cli::po::value<std::string>(&path)->required()->value_name("DATA"),
                               "the dataset: a file or its shards (also taken as the first bare argument)");
    cli::SharedOptions shared;
    shared.add(groups.input, cli::loader_option_names("data", {"data"}));
    cli::po::positional_options_description positional;
    positional.add("data", 1);
    cli::Parsed parsed = cli::parse(cli::arguments(argc, argv, 2), groups.all(), usage, &positional);
    if (parsed.help) return parsed;
    LoaderOptions names;
    names.reader = reader_options;
    shared.apply(parsed.values, names);
    reader_options = names.reader;  // the dataset names and the engine
    if (finish) finish(parsed);
    return parsed;
  });
}

}  // namespace strider::inspect
