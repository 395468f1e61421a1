// strider-convert --data IN --out OUT: rewrites sequences (h5py variable-length sequences, which only
// the hdf5 engine reads, or tokens + offsets over several shards) as one file of flat tokens [T] +
// int64 offsets [N+1] (+ int64 labels), contiguous and native, which every engine reads (direct and
// mmap included). Parallel: rank 0 creates OUT with its datasets allocated and writes the offsets and
// labels through HDF5; then every rank reads its share of the rows with the hdf5 engine and pwrites
// their tokens at the tokens dataset's file offset (no MPI-IO, no HDF5 write from several ranks).

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>

#include "common/cli.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/io/hdf5_handle.hpp"

namespace {

using namespace strider;

constexpr const char* usage =
    "usage: [mpirun -np R] strider-convert --data IN --out OUT [--tokens-key K] [--offsets-key O] [--label-key L]\n"
    "Rewrites sequences (h5py variable-length sequences named with --tokens-key, or tokens + offsets over shards)\n"
    "as one file of tokens [T] + int64 offsets [N+1] (+ int64 labels) under the same names, contiguous and native,\n"
    "which the direct and mmap engines read. Each rank converts its share of the rows; OUT must not exist.";

/// Rows a rank reads at once: bounded so that one read holds at most about this many token bytes.
constexpr std::int64_t kMaxBytesPerRead = std::int64_t{16} << 20;

/// Writes a whole one-dimensional dataset `key` of `count` values of `type` (contiguous; allocated at
/// creation, never filled: the values are written after), from `values` when not null. Returns the
/// file offset of its data (-1 when empty).
std::int64_t create_dataset(hid_t file, const std::string& key, hid_t type, std::int64_t count, const void* values,
                            const std::string& out) {
  const hsize_t dims = static_cast<hsize_t>(count);
  H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(1, &dims, nullptr), "creating the shape of " + key));
  H5PropertyList links(STRIDER_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), "creating link properties"));
  STRIDER_H5_CHECK(H5Pset_create_intermediate_group(links.get(), 1), "asking for intermediate groups");
  H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), "creating dataset properties"));
  STRIDER_H5_CHECK(H5Pset_layout(create.get(), H5D_CONTIGUOUS), "asking for a contiguous layout");
  STRIDER_H5_CHECK(H5Pset_alloc_time(create.get(), H5D_ALLOC_TIME_EARLY), "asking for early allocation");
  STRIDER_H5_CHECK(H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER), "asking for no fill");
  H5Dataset dataset(
      STRIDER_H5_CHECK(H5Dcreate2(file, key.c_str(), type, space.get(), links.get(), create.get(), H5P_DEFAULT),
                       "creating " + key + " in " + out));
  if (values != nullptr && count > 0)
    STRIDER_H5_CHECK(H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values),
                     "writing " + key + " of " + out);
  if (count == 0) return -1;
  const haddr_t address = H5Dget_offset(dataset.get());
  if (address == HADDR_UNDEF) STRIDER_THROW(DataError, "no file offset for " + key + " of " + out);
  return static_cast<std::int64_t>(address);
}

/// pwrite of exactly `bytes` at `offset`.
void pwrite_exactly(int descriptor, const std::byte* data, std::int64_t bytes, std::int64_t offset,
                    const std::string& out) {
  while (bytes > 0) {
    const ssize_t wrote = ::pwrite(descriptor, data, static_cast<std::size_t>(bytes), offset);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      STRIDER_THROW_ERRNO("pwrite()", "writing the tokens of " + out, errno);
    }
    data += wrote;
    bytes -= wrote;
    offset += wrote;
  }
}

int convert_main(Communicator& world, int argc, char** argv) {
  namespace po = cli::po;
  LoaderOptions options;
  std::string out;
  const cli::Parsed parsed = world.collective_try([&] {
    po::options_description input("Input"), output("Output");
    output.add_options()("out", po::value<std::string>(&out)->required(), "the file to write (must not exist)");
    cli::SharedOptions shared;
    shared.add(input, cli::loader_option_names("data", {"engine"}), {}, {"data"});
    po::options_description description;
    description.add(input).add(output);
    cli::Parsed result = cli::parse(cli::arguments(argc, argv, 1), description, usage);
    if (!result.help) shared.apply(result.values, options);
    return result;
  });
  if (parsed.help) return 0;

  ReaderOptions reader_options = options.reader;
  reader_options.engine = "hdf5";  // the one engine that reads vlen sequences and any layout
  reader_options.labels_in_memory = true;
  std::unique_ptr<BatchReader> reader = open_reader(world, options.data_path, reader_options);
  const DatasetInfo& info = reader->info();
  const std::int64_t rows = info.num_samples, tokens = info.num_tokens;
  const std::int64_t size = static_cast<std::int64_t>(element_bytes(info.element_type));
  const SharedView<std::int64_t> lengths = reader->lengths();
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(rows) + 1, 0);
  world.collective_try([&] {
    if (!info.variable_length)
      STRIDER_THROW(UsageError, "strider-convert rewrites sequences; " + options.data_path +
                                    " holds fixed-size samples (" + options.reader.keys.data + ")");
    std::partial_sum(lengths.begin(), lengths.end(), offsets.begin() + 1);
  });

  // Rank 0 creates OUT: offsets and labels written, tokens allocated. Every rank learns where.
  std::int64_t tokens_offset = -1;
  bool created = false;
  const auto remove_partial = [&] {
    if (world.is_root() && created) std::remove(out.c_str());
  };
  try {
    world.collective_try([&] {
      if (!world.is_root()) return;
      H5File file(H5Fcreate(out.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
      if (!file) {
        H5Eclear2(H5E_DEFAULT);
        STRIDER_THROW(UsageError,
                      "cannot create " + out +
                          (::access(out.c_str(), F_OK) == 0 ? ": it exists (strider-convert does not overwrite)"
                                                            : ": " + std::string(std::strerror(errno))));
      }
      created = true;
      const DatasetKeys& keys = options.reader.keys;
      tokens_offset =
          create_dataset(file.get(), keys.tokens, native_hdf5_type(info.element_type), tokens, nullptr, out);
      create_dataset(file.get(), keys.offsets, H5T_NATIVE_INT64, rows + 1, offsets.data(), out);
      if (info.has_labels) {
        const std::vector<std::int64_t> labels(reader->labels().begin(), reader->labels().end());
        create_dataset(file.get(), keys.labels, H5T_NATIVE_INT64, rows, labels.data(), out);
      }
    });
    world.broadcast(&tokens_offset, 1);

    // Every rank: rows [first, end) of the global index, read in pieces and written in place.
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t first = rows * world.rank() / world.size(), end = rows * (world.rank() + 1) / world.size();
    world.collective_try([&] {
      if (end == first || tokens == 0) return;
      const int descriptor = ::open(out.c_str(), O_WRONLY);
      if (descriptor < 0) STRIDER_THROW_ERRNO("open()", "opening " + out + " to write its tokens", errno);
      struct Closer {
        int descriptor;
        ~Closer() { ::close(descriptor); }
      } closer{descriptor};
      std::vector<std::int64_t> indices;
      std::vector<std::byte> buffer;
      auto last_report = start;
      for (std::int64_t row = first; row < end;) {
        std::int64_t stop = row + 1;
        while (stop < end && stop - row < 65536 && (offsets[stop + 1] - offsets[row]) * size <= kMaxBytesPerRead)
          ++stop;
        indices.resize(static_cast<std::size_t>(stop - row));
        std::iota(indices.begin(), indices.end(), row);
        const std::int64_t bytes = (offsets[stop] - offsets[row]) * size;
        buffer.resize(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)));
        BatchDestination destination;
        destination.samples = buffer.data();
        destination.samples_capacity_bytes = static_cast<std::int64_t>(buffer.size());
        reader->read(indices.data(), stop - row, destination);
        pwrite_exactly(descriptor, buffer.data(), bytes, tokens_offset + offsets[row] * size, out);
        row = stop;
        const auto now = std::chrono::steady_clock::now();
        if (world.is_root() && now - last_report > std::chrono::seconds(1)) {
          last_report = now;
          const double seconds = std::chrono::duration<double>(now - start).count();
          std::cerr << "strider-convert: " << (row - first) * 100 / (end - first) << "% of rank 0's rows ("
                    << std::fixed << std::setprecision(0) << static_cast<double>(row - first) / seconds << " rows/s)"
                    << std::endl;
        }
      }
      if (::fsync(descriptor) != 0) STRIDER_THROW_ERRNO("fsync()", "writing the tokens of " + out, errno);
    });
    world.barrier();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (world.is_root())
      std::cerr << "strider-convert: wrote " << rows << " rows (" << tokens << " " << element_name(info.element_type)
                << " tokens) to " << out << " in " << std::fixed << std::setprecision(2) << seconds << " s ("
                << std::setprecision(0) << static_cast<double>(rows) / std::max(seconds, 1e-9) << " rows/s, "
                << world.size() << " ranks)" << std::endl;
  } catch (...) {
    remove_partial();  // never leave a half-written file that looks like a dataset
    throw;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  strider::silence_hdf5_errors();
  return strider::run_mpi_app(argc, argv,
                              [&](strider::Communicator& world) { return convert_main(world, argc, argv); });
}
