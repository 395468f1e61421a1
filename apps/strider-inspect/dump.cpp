// strider-inspect dump FILE --indices 5,3,9 [--engine E]: the rows the pipeline's reader returns,
// one line each: "index label v0 v1 ..." (label "-" without labels; for sequences, the tokens).

#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>

#include "file_options.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/option_text.hpp"
#include "strider/device/element_conversion.hpp"
#include "subcommands.hpp"

namespace strider::inspect {
namespace {

template <typename T>
void print_values(std::ostream& out, const std::byte* bytes, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    out << ' ';
    if constexpr (std::is_floating_point_v<T>) {
      out << value;
    } else {
      out << static_cast<long long>(value);
    }
  }
}

void print_row(std::ostream& out, ElementType type, const std::byte* bytes, std::int64_t count) {
  switch (type) {
    case ElementType::int8:
      return print_values<std::int8_t>(out, bytes, count);
    case ElementType::uint8:
      return print_values<std::uint8_t>(out, bytes, count);
    case ElementType::int16:
      return print_values<std::int16_t>(out, bytes, count);
    case ElementType::uint16:
      return print_values<std::uint16_t>(out, bytes, count);
    case ElementType::int32:
      return print_values<std::int32_t>(out, bytes, count);
    case ElementType::uint32:
      return print_values<std::uint32_t>(out, bytes, count);
    case ElementType::int64:
      return print_values<std::int64_t>(out, bytes, count);
    case ElementType::uint64:
      for (std::int64_t i = 0; i < count; ++i) {
        std::uint64_t value;
        std::memcpy(&value, bytes + i * 8, 8);
        out << ' ' << value;
      }
      return;
    case ElementType::float32:
      return print_values<float>(out, bytes, count);
    case ElementType::float64:
      return print_values<double>(out, bytes, count);
    case ElementType::float16:
      for (std::int64_t i = 0; i < count; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, bytes + i * 2, 2);
        out << ' ' << float16_to_float32(bits);
      }
      return;
  }
}

int dump_main(Communicator& world, int argc, char** argv) {
  ReaderOptions reader_options;
  std::string path, indices_text;
  std::vector<std::int64_t> indices;
  cli::HelpGroups groups;
  groups.output.add_options()("indices", cli::po::value<std::string>(&indices_text)->required(),
                              "rows to print, in this order: 5,3,9");
  const cli::Parsed parsed = parse_file_command(
      world, argc, argv, groups,
      "usage: strider-inspect dump FILE --indices 5,3,9 [--engine auto|hdf5|direct|mmap]\n"
      "Prints the rows through the pipeline's reader, one line each: index label v0 v1 ...",
      path, reader_options, [&](const cli::Parsed&) { indices = parse_integer_list(indices_text, "indices"); });
  if (parsed.help) return 0;

  std::unique_ptr<BatchReader> reader = open_reader(world, path, reader_options);
  // Only rank 0 reads and prints; a bad index is the same error on every rank.
  const std::int64_t rows = reader->info().num_samples;
  world.collective_try([&] {
    for (std::int64_t index : indices)
      if (index < 0 || index >= rows)
        STRIDER_THROW(UsageError, "--indices: " + std::to_string(index) + " is outside [0, " + std::to_string(rows) +
                                      ") of " + path);
  });
  if (!world.is_root()) return 0;
  const auto count = static_cast<std::int64_t>(indices.size());
  const std::int64_t bytes = reader->samples_bytes(indices.data(), count);
  std::vector<std::byte> samples(static_cast<std::size_t>(bytes));
  std::vector<std::int32_t> labels(indices.size());
  std::vector<std::int64_t> offsets(indices.size() + 1);
  reader->read(indices.data(), count, BatchDestination{samples.data(), bytes, labels.data(), offsets.data()});

  const DatasetInfo& info = reader->info();
  const auto size = static_cast<std::int64_t>(element_bytes(info.element_type));
  std::ostringstream out;
  out.precision(std::numeric_limits<double>::max_digits10);
  if (info.element_type == ElementType::float32) out.precision(std::numeric_limits<float>::max_digits10);
  for (std::int64_t k = 0; k < count; ++k) {
    out << indices[k] << ' ';
    if (info.has_labels) {
      out << labels[k];
    } else {
      out << '-';
    }
    const std::int64_t first = info.variable_length ? offsets[k] : k * (info.sample_bytes / size);
    const std::int64_t elements = info.variable_length ? offsets[k + 1] - offsets[k] : info.sample_bytes / size;
    print_row(out, info.element_type, samples.data() + first * size, elements);
    out << '\n';
  }
  std::cout << out.str() << std::flush;
  return 0;
}

}  // namespace

int run_dump(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) { return dump_main(world, argc, argv); });
}

}  // namespace strider::inspect
