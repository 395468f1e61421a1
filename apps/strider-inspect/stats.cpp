// strider-inspect stats DATA [--json [PATH]] [--channel-axis auto|1|last]: count, mean, standard deviation,
// min and max of every feature (or every channel of images) over all rows of a dataset, each rank
// reading its share (strider/train/input_statistics.hpp), with a progress line and rows/s.

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "file_options.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/log.hpp"
#include "strider/train/input_statistics.hpp"
#include "subcommands.hpp"

namespace strider::inspect {
namespace {

int stats_main(Communicator& world, int argc, char** argv) {
  ReaderOptions reader_options;
  std::string path, axis = "auto";
  std::string json;
  cli::HelpGroups groups;
  cli::json_option(groups.output, &json, "print one JSON object (what strider-train --normalize FILE.json reads)");
  groups.input.add_options()(
      "channel-axis", cli::po::value<std::string>(&axis)->default_value(axis),
      "image samples: which axis holds the channels, 1 ([N, C, H, W]) or last ([N, H, W, C]); auto: last "
      "when the last dimension is at most 4 and dimension 1 is larger, else 1");
  const cli::Parsed parsed = parse_file_command(
      world, argc, argv, groups,
      "usage: [mpirun -np R] strider-inspect stats DATA [--json [PATH]] [--channel-axis auto|1|last]\n"
      "Count, mean, standard deviation, min and max per feature (per channel for images) over all rows;\n"
      "each rank reads its share (global counts, population standard deviations).",
      path, reader_options);
  if (parsed.help) return 0;

  std::unique_ptr<BatchReader> reader = open_reader(world, path, reader_options);
  const DatasetInfo& info = reader->info();
  StatisticsLayout layout = StatisticsLayout::per_feature;
  world.collective_try([&] {
    if (info.variable_length)
      STRIDER_THROW(UsageError, "stats needs fixed-size samples; " + path + " holds token sequences");
    layout = channel_layout(info.sample_shape, axis);
  });
  if (layout != StatisticsLayout::per_feature)
    log_info("stats per channel, ", statistics_layout_name(layout), axis == "auto" ? " (--channel-axis auto)" : "");
  const auto start = std::chrono::steady_clock::now();
  const bool large = info.num_samples * info.sample_bytes / world.size() > (std::int64_t{64} << 20);
  const InputStatistics stats = compute_input_statistics(world, *reader, layout, 0, [&](int percent) {
    if (large) std::cerr << "strider-inspect stats: " << percent << "% of rank 0's rows read" << std::endl;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!world.is_root()) return 0;

  std::ostringstream out;
  if (!json.empty()) {
    write_input_statistics(out, stats, path, info.element_type);
  } else {
    const char* name = layout == StatisticsLayout::per_feature ? "feature" : "channel";
    out << "stats of " << path << ": " << stats.rows << " rows, " << statistics_layout_name(layout) << "\n"
        << std::setprecision(6);
    const std::size_t shown = std::min<std::size_t>(stats.mean.size(), 64);
    for (std::size_t g = 0; g < shown; ++g)
      out << name << " " << g << ": count " << stats.count[g] << ", mean " << stats.mean[g] << ", std "
          << stats.stddev[g] << ", min " << stats.min[g] << ", max " << stats.max[g] << "\n";
    if (shown < stats.mean.size()) out << "... (" << stats.mean.size() - shown << " more; --json prints all)\n";
  }
  cli::write_report(json, out.str());
  std::cerr << "strider-inspect stats: " << stats.rows << " rows in " << std::fixed << std::setprecision(2) << seconds
            << " s (" << std::setprecision(0) << static_cast<double>(stats.rows) / std::max(seconds, 1e-9)
            << " rows/s, " << world.size() << " ranks)" << std::endl;
  return 0;
}

}  // namespace

int run_stats(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) { return stats_main(world, argc, argv); });
}

}  // namespace strider::inspect
