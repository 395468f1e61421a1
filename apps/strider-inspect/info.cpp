// strider-inspect info DATA [--json]: what strider finds in a dataset file, or in the shards of a
// dataset split over several (shape, type, layout, chunking, size, the shards and their global row
// ranges, the engine auto picks, class and length histograms), through the same validation the
// pipeline uses, so an unusable file fails here with the same message.

#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>

#include "file_options.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/json_writer.hpp"
#include "strider/core/option_text.hpp"
#include "subcommands.hpp"

namespace strider::inspect {
namespace {

/// Lengths in power-of-two buckets: bucket b holds lengths in [2^(b-1), 2^b) (bucket 0: length 0).
std::vector<std::int64_t> length_buckets(const SharedView<std::int64_t>& lengths) {
  std::vector<std::int64_t> buckets;
  for (std::int64_t length : lengths) {
    std::size_t bucket = 0;
    while ((std::int64_t{1} << bucket) <= length) ++bucket;
    if (buckets.size() <= bucket) buckets.resize(bucket + 1, 0);
    ++buckets[bucket];
  }
  return buckets;
}
std::int64_t bucket_low(std::size_t bucket) {
  return bucket == 0 ? 0 : std::int64_t{1} << (bucket - 1);
}

int info_main(Communicator& world, int argc, char** argv) {
  ReaderOptions reader_options;
  std::string path;
  std::string json;
  cli::HelpGroups groups;
  cli::json_option(groups.output, &json, "print one JSON object");
  const cli::Parsed parsed =
      parse_file_command(world, argc, argv, groups,
                         "usage: strider-inspect info DATA [--json [PATH]] [--data-key K ...]\n"
                         "Shape, type, layout, chunking, size, shards, engine, class and length histograms of a\n"
                         "dataset: a file, or shards (a comma list, a quoted glob, a directory or @list.txt).",
                         path, reader_options);
  if (parsed.help) return 0;

  std::unique_ptr<BatchReader> reader = open_reader(world, path, reader_options);
  if (!world.is_root()) return 0;
  const DatasetInfo& info = reader->info();
  // The bytes of every shard (-1 when one cannot be stat'ed).
  std::int64_t file_bytes = 0;
  for (const DatasetShard& shard : info.shards) {
    struct stat status {};
    if (::stat(shard.path.c_str(), &status) != 0) {
      file_bytes = -1;
      break;
    }
    file_bytes += status.st_size;
  }
  std::map<std::int64_t, std::int64_t> classes;
  for (std::int32_t label : reader->labels()) ++classes[label];
  const SharedView<std::int64_t> lengths = reader->lengths();
  const std::vector<std::int64_t> buckets = length_buckets(lengths);
  std::int64_t min_length = 0, max_length = 0;
  if (!lengths.empty()) {
    const auto [low, high] = std::minmax_element(lengths.begin(), lengths.end());
    min_length = *low;
    max_length = *high;
  }

  std::ostringstream out;
  if (!json.empty()) {
    JsonWriter writer(out);
    writer.begin_object();
    writer.field("path", path);
    writer.field("file_bytes", file_bytes);
    writer.field("kind", info.variable_length ? "sequences" : "fixed");
    writer.field("samples", info.num_samples);
    writer.key("sample_shape");
    writer.array(info.sample_shape);
    writer.field("element_type", element_name(info.element_type));
    writer.field("sample_bytes", info.sample_bytes);
    writer.field("tokens", info.num_tokens);
    writer.field("layout", info.layout);
    writer.key("chunk_shape");
    writer.array(info.chunk_shape);
    writer.field("compressed", info.compressed);
    writer.field("compression", info.compression);
    writer.field("engine", reader->engine());
    writer.field("has_labels", info.has_labels);
    writer.key("shards");
    writer.begin_array();
    for (const DatasetShard& shard : info.shards) {
      writer.begin_object();
      writer.field("path", shard.path);
      writer.field("first_row", shard.first_row);
      writer.field("rows", shard.rows);
      writer.end_object();
    }
    writer.end_array();
    writer.key("class_counts");
    writer.begin_array();
    for (const auto& [label, count] : classes) writer.array(std::vector<std::int64_t>{label, count});
    writer.end_array();
    writer.key("length_histogram");
    writer.begin_array();
    for (std::size_t b = 0; b < buckets.size(); ++b)
      if (buckets[b] > 0)
        writer.array(std::vector<std::int64_t>{bucket_low(b), b == 0 ? 1 : bucket_low(b) * 2, buckets[b]});
    writer.end_array();
    if (info.variable_length) {
      writer.field("min_length", min_length);
      writer.field("max_length", max_length);
    }
    writer.end_object();
    out << '\n';
  } else {
    out << "file:     " << path << " (" << file_bytes << " bytes"
        << (info.shards.size() > 1 ? " in " + std::to_string(info.shards.size()) + " shards" : "") << ")\n";
    if (info.shards.size() > 1) {
      out << "shards:   global rows, file\n";
      for (const DatasetShard& shard : info.shards)
        out << "          " << shard.first_row << ".." << shard.first_row + shard.rows - 1 << "  " << shard.path
            << "\n";
    }
    if (info.variable_length) {
      out << "kind:     sequences: " << info.num_samples << " rows, " << info.num_tokens << " "
          << element_name(info.element_type) << " tokens (" << reader_options.keys.tokens << " + "
          << reader_options.keys.offsets << ")\n";
      out << "lengths:  min " << min_length << ", max " << max_length << ", mean "
          << static_cast<double>(info.num_tokens == 0 ? 0 : info.num_tokens) / static_cast<double>(info.num_samples)
          << "\n";
    } else {
      std::vector<std::int64_t> shape{info.num_samples};
      shape.insert(shape.end(), info.sample_shape.begin(), info.sample_shape.end());
      out << "kind:     fixed-size samples " << reader_options.keys.data << " " << format_shape(shape) << " "
          << element_name(info.element_type) << " (" << info.sample_bytes << " bytes per sample)\n";
    }
    out << "layout:   " << info.layout;
    if (!info.chunk_shape.empty()) out << ", chunks " << format_shape(info.chunk_shape);
    out << (info.compressed ? ", compressed" : "") << (info.compression.empty() ? "" : " (" + info.compression + ")")
        << "\n";
    out << "engine:   " << reader->engine() << (reader_options.engine == "auto" ? " (auto)" : "") << "\n";
    if (info.has_labels) {
      out << "labels:   " << reader_options.keys.labels << ", " << classes.size() << " classes; counts:";
      std::size_t shown = 0;
      for (const auto& [label, count] : classes) {
        if (++shown > 32) {
          out << " ...";
          break;
        }
        out << " " << label << ":" << count;
      }
      out << "\n";
    } else {
      out << "labels:   none ("
          << (reader_options.keys.labels == kNoLabelsKey ? std::string("--label-key none")
                                                         : reader_options.keys.labels + " not found")
          << ")\n";
    }
    if (info.variable_length) {
      out << "length histogram:";
      for (std::size_t b = 0; b < buckets.size(); ++b)
        if (buckets[b] > 0)
          out << " [" << bucket_low(b) << "," << (b == 0 ? 1 : bucket_low(b) * 2) << "):" << buckets[b];
      out << "\n";
    }
  }
  cli::write_report(json, out.str());
  return 0;
}

}  // namespace

int run_info(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) { return info_main(world, argc, argv); });
}

}  // namespace strider::inspect
