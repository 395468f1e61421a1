// strider-inspect stats DATA [--json] [--channel-axis auto|1|last]: count, mean, standard deviation,
// min and max of every feature (or every channel of images) over all rows of a dataset. Each rank
// reads its contiguous share of the rows; the partial statistics are merged with Chan et al.'s
// pairwise update (numerically stable: no sum of squares), first per block on a rank, then across
// ranks in rank order, so the result depends on the rank count only through rounding.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

#include "file_options.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/json_writer.hpp"
#include "strider/core/log.hpp"
#include "strider/device/element_conversion.hpp"
#include "subcommands.hpp"

namespace strider::inspect {
namespace {

/// Count, mean and sum of squared deviations from the mean (M2) of some values; merged pairwise.
struct Moments {
  double count = 0.0;
  double mean = 0.0;
  double m2 = 0.0;
  void merge(const Moments& other) {
    if (other.count == 0.0) return;
    const double total = count + other.count;
    const double delta = other.mean - mean;
    mean += delta * (other.count / total);
    m2 += other.m2 + delta * delta * (count * other.count / total);
    count = total;
  }
};

/// The statistics layout of samples of `shape` (one sample's dimensions) for --channel-axis
/// `axis`: images ([C, H, W] or [H, W, C]) per channel, anything else per feature.
StatisticsLayout choose_layout(const std::vector<std::int64_t>& shape, const std::string& axis) {
  if (axis != "auto" && axis != "1" && axis != "last")
    STRIDER_THROW(UsageError, "--channel-axis must be auto, 1 or last, got '" + axis + "'");
  if (shape.size() != 3) {
    if (axis != "auto")
      STRIDER_THROW(UsageError, "--channel-axis " + axis +
                                    " needs image samples ([N, C, H, W] or [N, H, W, C]); these samples have " +
                                    std::to_string(shape.size()) + " dimensions (statistics per feature)");
    return StatisticsLayout::per_feature;
  }
  if (axis == "1") return StatisticsLayout::channels_first;
  if (axis == "last") return StatisticsLayout::channels_last;
  return shape.back() <= 4 && shape.front() > shape.back() ? StatisticsLayout::channels_last
                                                           : StatisticsLayout::channels_first;
}

int stats_main(Communicator& world, int argc, char** argv) {
  ReaderOptions reader_options;
  std::string path, axis = "auto";
  bool json = false;
  cli::po::options_description description("stats options");
  description.add_options()("json", cli::po::bool_switch(&json), "print one JSON object")(
      "channel-axis", cli::po::value<std::string>(&axis)->default_value(axis),
      "image samples: which axis holds the channels, 1 ([N, C, H, W]) or last ([N, H, W, C]); auto: last "
      "when the last dimension is at most 4 and dimension 1 is larger, else 1");
  const cli::Parsed parsed = parse_file_command(
      world, argc, argv, description,
      "usage: [mpirun -np R] strider-inspect stats DATA [--json] [--channel-axis auto|1|last]\n"
      "Count, mean, standard deviation, min and max per feature (per channel for images) over all rows;\n"
      "each rank reads its share (global counts, population standard deviations).",
      path, reader_options);
  if (parsed.help) return 0;

  reader_options.require_labels = false;
  std::unique_ptr<BatchReader> reader = open_reader(world, path, reader_options);
  const DatasetInfo& info = reader->info();
  StatisticsLayout layout = StatisticsLayout::per_feature;
  std::int64_t features = 0, groups = 0;
  world.collective_try([&] {
    if (info.variable_length)
      STRIDER_THROW(UsageError, "stats needs fixed-size samples; " + path + " holds token sequences");
    layout = choose_layout(info.sample_shape, axis);
    features = std::accumulate(info.sample_shape.begin(), info.sample_shape.end(), std::int64_t{1},
                               std::multiplies<std::int64_t>());
    groups = layout == StatisticsLayout::channels_first  ? info.sample_shape.front()
             : layout == StatisticsLayout::channels_last ? info.sample_shape.back()
                                                         : features;
  });
  if (world.is_root() && layout != StatisticsLayout::per_feature)
    log_info("stats per channel: ", groups, " channels, ", statistics_layout_name(layout),
             axis == "auto" ? " (chosen by --channel-axis auto)" : "");

  // This rank's rows, in blocks of about 16 MiB, converted to float32 by the element conversion.
  const std::int64_t rows = info.num_samples;
  const std::int64_t first = rows * world.rank() / world.size(), last = rows * (world.rank() + 1) / world.size();
  const std::int64_t block_rows = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / info.sample_bytes);
  const ElementConversion conversion(info.element_type, features, ConversionOptions{ElementType::float32, {}});
  std::vector<Moments> moments(static_cast<std::size_t>(groups));
  std::vector<double> low(static_cast<std::size_t>(groups), std::numeric_limits<double>::infinity());
  std::vector<double> high(static_cast<std::size_t>(groups), -std::numeric_limits<double>::infinity());
  const auto group_of = [&](std::int64_t f) {
    return layout == StatisticsLayout::channels_first  ? f / (features / groups)
           : layout == StatisticsLayout::channels_last ? f % groups
                                                       : f;
  };
  const auto start = std::chrono::steady_clock::now();
  const bool show_progress = world.is_root() && (last - first) * info.sample_bytes > (std::int64_t{64} << 20);
  world.collective_try([&] {
    std::vector<std::int64_t> indices;
    std::vector<std::byte> stored(static_cast<std::size_t>(block_rows * info.sample_bytes));
    std::vector<float> values(static_cast<std::size_t>(block_rows * features));
    std::vector<Moments> block(moments.size());
    int shown_percent = 0;
    for (std::int64_t begin = first; begin < last; begin += block_rows) {
      const std::int64_t count = std::min(block_rows, last - begin);
      indices.resize(static_cast<std::size_t>(count));
      std::iota(indices.begin(), indices.end(), begin);
      reader->read(indices.data(), count,
                   BatchDestination{stored.data(), static_cast<std::int64_t>(stored.size()), nullptr, nullptr});
      conversion.convert(stored.data(), count, reinterpret_cast<std::byte*>(values.data()));
      // Two passes over the block (mean, then squared deviations), then one merge per group.
      std::fill(block.begin(), block.end(), Moments{});
      for (std::int64_t i = 0; i < count * features; ++i) {
        const double x = values[static_cast<std::size_t>(i)];
        const auto g = static_cast<std::size_t>(group_of(i % features));
        block[g].count += 1.0;
        block[g].mean += x;
        low[g] = std::min(low[g], x);
        high[g] = std::max(high[g], x);
      }
      for (Moments& m : block) m.mean /= m.count;
      for (std::int64_t i = 0; i < count * features; ++i) {
        const auto g = static_cast<std::size_t>(group_of(i % features));
        const double deviation = values[static_cast<std::size_t>(i)] - block[g].mean;
        block[g].m2 += deviation * deviation;
      }
      for (std::size_t g = 0; g < moments.size(); ++g) moments[g].merge(block[g]);
      const int percent = static_cast<int>((begin + count - first) * 100 / (last - first));
      if (show_progress && percent / 10 > shown_percent / 10) {
        shown_percent = percent;
        std::cerr << "strider-inspect stats: " << percent << "% of rank 0's rows read" << std::endl;
      }
    }
  });

  // Across ranks: every rank's moments in its own slot of a zeroed buffer, summed, then merged in
  // rank order (the same order on every rank).
  const auto slots = static_cast<std::size_t>(world.size()) * moments.size() * 3;
  std::vector<double> all(slots, 0.0);
  for (std::size_t g = 0; g < moments.size(); ++g) {
    const std::size_t at = (static_cast<std::size_t>(world.rank()) * moments.size() + g) * 3;
    all[at] = moments[g].count;
    all[at + 1] = moments[g].mean;
    all[at + 2] = moments[g].m2;
  }
  world.all_reduce(all.data(), static_cast<std::int64_t>(all.size()), ReduceOp::sum);
  world.all_reduce(low.data(), groups, ReduceOp::min);
  world.all_reduce(high.data(), groups, ReduceOp::max);
  std::vector<Moments> total(moments.size());
  for (int rank = 0; rank < world.size(); ++rank)
    for (std::size_t g = 0; g < total.size(); ++g) {
      const std::size_t at = (static_cast<std::size_t>(rank) * total.size() + g) * 3;
      total[g].merge(Moments{all[at], all[at + 1], all[at + 2]});
    }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!world.is_root()) return 0;

  std::vector<double> counts, means, stddevs;
  for (const Moments& m : total) {
    counts.push_back(m.count);
    means.push_back(m.mean);
    stddevs.push_back(std::sqrt(m.m2 / m.count));  // population standard deviation
  }
  std::ostringstream out;
  out << std::setprecision(std::numeric_limits<double>::max_digits10);
  if (json) {
    JsonWriter writer(out);
    writer.begin_object();
    writer.field("path", path);
    writer.field("rows", rows);
    writer.key("sample_shape");
    writer.array(info.sample_shape);
    writer.field("element_type", element_name(info.element_type));
    writer.field("layout", statistics_layout_name(layout));
    writer.key("count");
    writer.array(std::vector<std::int64_t>(counts.begin(), counts.end()));
    writer.key("mean");
    writer.array(means);
    writer.key("std");
    writer.array(stddevs);
    writer.key("min");
    writer.array(low);
    writer.key("max");
    writer.array(high);
    writer.end_object();
    out << '\n';
  } else {
    const char* name = layout == StatisticsLayout::per_feature ? "feature" : "channel";
    out << "stats of " << path << ": " << rows << " rows, " << statistics_layout_name(layout) << "\n";
    out << std::setprecision(6);
    const std::size_t shown = std::min<std::size_t>(total.size(), 64);
    for (std::size_t g = 0; g < shown; ++g)
      out << name << " " << g << ": count " << static_cast<std::int64_t>(counts[g]) << ", mean " << means[g] << ", std "
          << stddevs[g] << ", min " << low[g] << ", max " << high[g] << "\n";
    if (shown < total.size()) out << "... (" << total.size() - shown << " more; --json prints all)\n";
  }
  std::cout << out.str() << std::flush;
  std::cerr << "strider-inspect stats: " << rows << " rows in " << std::fixed << std::setprecision(2) << seconds
            << " s (" << std::setprecision(0) << static_cast<double>(rows) / std::max(seconds, 1e-9) << " rows/s, "
            << world.size() << " ranks)" << std::endl;
  return 0;
}

}  // namespace

int run_stats(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) { return stats_main(world, argc, argv); });
}

}  // namespace strider::inspect
