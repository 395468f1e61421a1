#pragma once
// Option parsing shared by the strider-inspect subcommands that read one dataset file (info, dump,
// read-speed, stats): the dataset as --data or the first bare argument, the dataset-name options and --engine.

#include <functional>
#include <string>

#include "common/cli.hpp"
#include "strider/comm/communicator.hpp"

namespace strider::inspect {

/// Collective over world: adds FILE and the dataset options to `groups.input`, parses argv[2..],
/// then runs `finish` (unless --help) for checks that need the parsed values. Errors are agreed.
cli::Parsed parse_file_command(const Communicator& world, int argc, char** argv, cli::HelpGroups& groups,
                               const std::string& usage, std::string& path, ReaderOptions& reader_options,
                               const std::function<void(const cli::Parsed&)>& finish = {});

}  // namespace strider::inspect
