// The readers against a naive oracle (one H5Dread per row, serial driver), for every engine, several
// types and shapes, contiguous / chunked / compressed, fixed and variable length, at 1..4 ranks,
// with duplicates and empty batches; and the bad inputs open_reader must refuse on every rank.
// Files are written by rank 0 with the HDF5 C API (no h5py in CI).
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

#include "io/reader_detail.hpp"
#include "mpi_test_support.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/io/hdf5_handle.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/train/fingerprint.hpp"

using namespace strider;
using strider::testing::world;

namespace {

/// A scratch folder made by rank 0 and known to every rank; removed at exit by rank 0.
const std::string& test_folder() {
  static const std::string folder = [] {
    std::string path;
    if (world().is_root()) {
      char name[] = "/tmp/strider_readers_XXXXXX";
      path = mkdtemp(name) ? name : "/tmp";
    }
    world().broadcast(path);
    return path;
  }();
  return folder;
}

struct Layout {
  std::string name;        // contiguous | chunked | deflate
  hsize_t chunk_rows = 0;  // along dimension 0
  bool deflate = false;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {{"contiguous", 0, false}, {"chunked", 7, false}, {"deflate", 16, true}};
  return all;
}

/// Writes a dataset from native values of type mem_type, stored as file_type.
void write_dataset(hid_t file, const std::string& key, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* values, const Layout& layout) {
  H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), key));
  H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), key));
  if (layout.chunk_rows > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::min<hsize_t>(layout.chunk_rows, std::max<hsize_t>(1, dims[0]));
    STRIDER_H5_CHECK(H5Pset_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data()), key);
    if (layout.deflate) STRIDER_H5_CHECK(H5Pset_deflate(create.get(), 4), key);
  }
  H5Dataset dataset(STRIDER_H5_CHECK(
      H5Dcreate2(file, key.c_str(), file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), key));
  STRIDER_H5_CHECK(H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), key);
}

H5File create_file(const std::string& path) {
  return H5File(STRIDER_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path));
}

template <typename T>
std::vector<T> make_values(std::int64_t count) {
  std::vector<T> values(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t base = (i * 37 + 11) % 113;
    if constexpr (std::is_floating_point_v<T>) {
      values[i] = static_cast<T>(base) * T(0.25) - T(3.5);
    } else {
      values[i] = static_cast<T>(std::is_signed_v<T> ? base - 50 : base);
    }
  }
  return values;
}

/// One fixed-size test file: samples of `element`, stored as file_type, plus int64 labels i % 7.
struct FixedCase {
  std::string name;
  ElementType element;
  hid_t file_type;
  std::vector<hsize_t> dims;
};

template <typename T>
void write_fixed(const std::string& path, const FixedCase& test, hid_t mem_type, const Layout& layout) {
  std::int64_t elements = 1;
  for (hsize_t extent : test.dims) elements *= static_cast<std::int64_t>(extent);
  const std::vector<T> values = make_values<T>(elements);
  H5File file = create_file(path);
  write_dataset(file.get(), "/samples", test.file_type, mem_type, test.dims, values.data(), layout);
  std::vector<std::int64_t> labels(test.dims[0]);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 7);
  write_dataset(file.get(), "/labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {test.dims[0]}, labels.data(), layout);
}

void write_fixed_any(const std::string& path, const FixedCase& test, const Layout& layout) {
  switch (test.element) {
    case ElementType::float32:
      return write_fixed<float>(path, test, H5T_NATIVE_FLOAT, layout);
    case ElementType::float64:
      return write_fixed<double>(path, test, H5T_NATIVE_DOUBLE, layout);
    case ElementType::uint8:
      return write_fixed<std::uint8_t>(path, test, H5T_NATIVE_UINT8, layout);
    case ElementType::int16:
      return write_fixed<std::int16_t>(path, test, H5T_NATIVE_INT16, layout);
    case ElementType::int64:
      return write_fixed<std::int64_t>(path, test, H5T_NATIVE_INT64, layout);
    case ElementType::uint32:
      return write_fixed<std::uint32_t>(path, test, H5T_NATIVE_UINT32, layout);
    default:
      FAIL("no writer for this type");
  }
}

/// Sequences: int32 tokens [T] and int64 offsets [N+1], lengths 0..12 (some empty), labels i % 5.
void write_sequences(const std::string& path, std::int64_t rows, const Layout& layout) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t i = 0; i < rows; ++i) offsets[i + 1] = offsets[i] + (i * 7 + 3) % 13;
  const std::vector<std::int32_t> tokens = make_values<std::int32_t>(offsets.back());
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>(i % 5);
  H5File file = create_file(path);
  write_dataset(file.get(), "/tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, {static_cast<hsize_t>(tokens.size())},
                tokens.data(), layout);
  write_dataset(file.get(), "/offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, {offsets.size()}, offsets.data(), layout);
  write_dataset(file.get(), "/labels", H5T_STD_I32LE, H5T_NATIVE_INT32, {labels.size()}, labels.data(), layout);
}

/// Rank 0 writes, everyone waits.
template <typename Write>
std::string make_file(const std::string& name, Write&& write) {
  const std::string path = test_folder() + "/" + name + ".h5";
  world().collective_try([&] {
    if (world().is_root()) write(path);
  });
  return path;
}

/// The oracle: one H5Dread per row with the serial driver, bytes in batch order.
std::vector<std::byte> oracle_rows(const std::string& path, const std::string& key, hid_t mem_type,
                                   std::size_t element_size, const std::vector<std::int64_t>& rows,
                                   const std::vector<std::int64_t>* offsets) {
  H5File file(STRIDER_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path));
  H5Dataset dataset(STRIDER_H5_CHECK(H5Dopen2(file.get(), key.c_str(), H5P_DEFAULT), key));
  H5Dataspace space(STRIDER_H5_CHECK(H5Dget_space(dataset.get()), key));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<std::byte> bytes;
  for (std::int64_t row : rows) {
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    if (offsets) {
      start[0] = static_cast<hsize_t>((*offsets)[row]);
      count[0] = static_cast<hsize_t>((*offsets)[row + 1] - (*offsets)[row]);
    } else {
      start[0] = static_cast<hsize_t>(row);
      count[0] = 1;
    }
    hsize_t elements = 1;
    for (hsize_t extent : count) elements *= extent;
    if (elements == 0) continue;
    STRIDER_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                     key);
    H5Dataspace memory(STRIDER_H5_CHECK(H5Screate_simple(1, &elements, nullptr), key));
    const std::size_t at = bytes.size();
    bytes.resize(at + elements * element_size);
    STRIDER_H5_CHECK(H5Dread(dataset.get(), mem_type, memory.get(), space.get(), H5P_DEFAULT, bytes.data() + at), key);
  }
  return bytes;
}

/// This rank's test batches: shuffled with duplicates, an empty one, every row reversed, one row.
std::vector<std::vector<std::int64_t>> test_batches(std::int64_t rows) {
  std::mt19937_64 engine(1234 + static_cast<std::uint64_t>(world().rank()));
  std::vector<std::vector<std::int64_t>> batches;
  for (int b = 0; b < 3; ++b) {
    std::vector<std::int64_t> batch;
    for (int k = 0; k < 40; ++k)
      batch.push_back(static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(rows)));
    batch.push_back(batch.front());  // a duplicate for sure
    batches.push_back(batch);
  }
  batches.push_back({});
  std::vector<std::int64_t> all;
  for (std::int64_t i = rows - 1; i >= 0; --i) all.push_back(i);
  batches.push_back(all);
  batches.push_back({rows - 1});
  return batches;
}

/// Reads every test batch with `engine` and counts rows that differ from the oracle (local count).
/// `labels_in_memory` false: labels are read per batch where the file allows (*labels_per_batch says).
std::int64_t mismatches(const std::string& path, const std::string& engine, hid_t mem_type, bool variable_length,
                        std::string* chosen_engine, bool labels_in_memory = true, bool* labels_per_batch = nullptr) {
  ReaderOptions options;
  options.engine = engine;
  options.copy_threads = engine == "mmap" ? 3 : 1;
  options.labels_in_memory = labels_in_memory;
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
  *chosen_engine = reader->engine();
  const DatasetInfo& info = reader->info();
  if (labels_per_batch != nullptr) *labels_per_batch = info.labels_per_batch;
  std::int64_t wrong = 0;
  // Labels read per batch are not held; held labels are all there.
  if (reader->labels().size() != (info.labels_per_batch ? 0u : static_cast<std::size_t>(info.num_samples))) ++wrong;
  const std::size_t size = element_bytes(info.element_type);
  std::vector<std::int64_t> all_offsets;
  if (variable_length) {
    all_offsets.push_back(0);
    for (std::int64_t length : reader->lengths()) all_offsets.push_back(all_offsets.back() + length);
  }
  for (const auto& batch : test_batches(info.num_samples)) {
    const auto count = static_cast<std::int64_t>(batch.size());
    const std::int64_t bytes = reader->samples_bytes(batch.data(), count);
    std::vector<std::byte> samples(static_cast<std::size_t>(bytes) + 1);
    std::vector<std::int32_t> labels(batch.size() + 1, -1);
    std::vector<std::int64_t> offsets(batch.size() + 1, -1);
    reader->read(batch.data(), count, BatchDestination{samples.data(), bytes, labels.data(), offsets.data()});
    const std::vector<std::byte> expected = oracle_rows(path, variable_length ? "/tokens" : "/samples", mem_type, size,
                                                        batch, variable_length ? &all_offsets : nullptr);
    if (expected.size() != static_cast<std::size_t>(bytes) ||
        (!expected.empty() &&
         (!expected.empty() && std::memcmp(expected.data(), samples.data(), expected.size()) != 0)))
      ++wrong;
    for (std::size_t k = 0; k < batch.size(); ++k) {
      if (labels[k] != batch[k] % (variable_length ? 5 : 7)) ++wrong;
      if (!info.labels_per_batch && labels[k] != reader->labels()[batch[k]]) ++wrong;
    }
    if (variable_length) {
      std::int64_t at = 0;
      for (std::size_t k = 0; k < batch.size(); ++k) {
        if (offsets[k] != at) ++wrong;
        at += reader->lengths()[batch[k]];
      }
      if (offsets[batch.size()] != at) ++wrong;
    }
  }
  const ReadStats stats = reader->stats();
  if (stats.batches != 6) ++wrong;
  return wrong;
}

std::int64_t agreed_sum(std::int64_t value) {
  return world().all_reduce(value, ReduceOp::sum);
}

/// Every engine against the oracle on `path`, labels held and per batch. `raw`: direct and mmap can
/// read the data (else they are refused on every rank, and auto picks hdf5); `labels_raw`: the labels
/// can be read per batch (else they are held even when asked not to be).
void check_every_engine(const std::string& path, bool raw, bool labels_raw, hid_t mem_type, bool variable_length) {
  for (const std::string engine : {"hdf5", "direct", "mmap", "auto"}) {
    INFO("engine " << engine);
    if (!raw && (engine == std::string("direct") || engine == std::string("mmap"))) {
      REQUIRE_THROWS_AS(open_reader(world(), path, ReaderOptions{{}, engine}), AgreedError);
      continue;
    }
    for (const bool labels_in_memory : {true, false}) {
      CAPTURE(labels_in_memory);
      std::string chosen;
      bool per_batch = false;
      REQUIRE(agreed_sum(mismatches(path, engine, mem_type, variable_length, &chosen, labels_in_memory, &per_batch)) ==
              0);
      REQUIRE(per_batch == (!labels_in_memory && labels_raw));
      if (engine == std::string("auto")) REQUIRE(chosen == (raw ? "mmap" : "hdf5"));
    }
  }
}

/// Opens `path` with `engine`, labels read per batch (which the file must allow).
std::unique_ptr<BatchReader> open_with_labels_per_batch(const std::string& path, const std::string& engine) {
  ReaderOptions options;
  options.engine = engine;
  options.labels_in_memory = false;
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
  REQUIRE(reader->info().labels_per_batch);
  return reader;
}

}  // namespace

TEST_CASE("every engine reads fixed-size samples as the per-row oracle does", "[mpi][io]") {
  const std::vector<FixedCase> cases = {
      {"f32", ElementType::float32, H5T_IEEE_F32LE, {300, 8}},
      {"u8_image", ElementType::uint8, H5T_STD_U8LE, {120, 3, 4, 5}},
      {"i16_big_endian", ElementType::int16, H5T_STD_I16BE, {200, 7}},
      {"f64_scalar_rows", ElementType::float64, H5T_IEEE_F64LE, {257}},
      {"i64", ElementType::int64, H5T_STD_I64LE, {100, 2}},
      {"u32", ElementType::uint32, H5T_STD_U32LE, {90, 3}},
  };
  for (const FixedCase& test : cases) {
    for (const Layout& layout : layouts()) {
      const std::string path =
          make_file(test.name + "_" + layout.name, [&](const std::string& p) { write_fixed_any(p, test, layout); });
      INFO(test.name << " " << layout.name);
      // The labels are int64 little-endian with the data's layout: per batch only when contiguous.
      check_every_engine(path, layout.name == "contiguous" && test.file_type != H5T_STD_I16BE,
                         layout.name == "contiguous", io_detail::native_hdf5_type(test.element), false);
    }
  }
}

TEST_CASE("every engine reads variable-length sequences as the per-row oracle does", "[mpi][io]") {
  for (const Layout& layout : layouts()) {
    const std::string path =
        make_file("sequences_" + layout.name, [&](const std::string& p) { write_sequences(p, 333, layout); });
    INFO(layout.name);
    const bool raw = layout.name == "contiguous";
    check_every_engine(path, raw, raw, H5T_NATIVE_INT32, true);
  }
}

TEST_CASE("labels read per batch are checked per batch: a label beyond int32 fails naming its row", "[mpi][io]") {
  const std::int64_t rows = 50;
  const std::string path = make_file("uint64_labels", [&](const std::string& p) {
    std::vector<float> samples(static_cast<std::size_t>(rows) * 4, 1.0f);
    std::vector<std::uint64_t> labels(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint64_t>(i % 3);
    labels[5] = (std::uint64_t{1} << 63) + 1;
    H5File file = create_file(p);
    write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {static_cast<hsize_t>(rows), 4},
                  samples.data(), layouts()[0]);
    write_dataset(file.get(), "/labels", H5T_STD_U64LE, H5T_NATIVE_UINT64, {static_cast<hsize_t>(rows)}, labels.data(),
                  layouts()[0]);
  });
  // Held in memory, the file is refused at open, as before.
  REQUIRE_THROWS_AS(open_reader(world(), path, ReaderOptions{}), AgreedError);
  for (const std::string engine : {"hdf5", "direct", "mmap"}) {
    INFO("engine " << engine);
    std::unique_ptr<BatchReader> reader = open_with_labels_per_batch(path, engine);
    std::vector<std::byte> samples(4 * sizeof(float) * 3);
    std::vector<std::int32_t> labels(3, -1);
    const BatchDestination destination{samples.data(), static_cast<std::int64_t>(samples.size()), labels.data(),
                                       nullptr};
    const std::vector<std::int64_t> good = {49, 4, 6};
    reader->read(good.data(), 3, destination);
    REQUIRE(labels == std::vector<std::int32_t>{49 % 3, 4 % 3, 6 % 3});
    const std::vector<std::int64_t> bad = {7, 5, 2};
    try {
      reader->read(bad.data(), 3, destination);
      FAIL("a label beyond int32 was read");
    } catch (const DataError& error) {
      REQUIRE_THAT(error.what(), Catch::Contains("/labels[5]") && Catch::Contains("does not fit int32"));
    }
  }
}

TEST_CASE("labels read per batch give the same ranges and the same dataset fingerprint as held ones", "[mpi][io]") {
  const FixedCase test{"fingerprint", ElementType::float32, H5T_IEEE_F32LE, {300, 2}};
  const std::string path =
      make_file("fingerprint", [&](const std::string& p) { write_fixed_any(p, test, layouts()[0]); });
  const DatasetKeys keys;
  std::unique_ptr<BatchReader> held = open_reader(world(), path, ReaderOptions{});
  REQUIRE_FALSE(held->info().labels_per_batch);
  const std::uint64_t expected = dataset_fingerprint(held->info(), held->labels(), held->lengths(), keys);
  for (const std::string engine : {"hdf5", "direct", "mmap"}) {
    INFO("engine " << engine);
    std::unique_ptr<BatchReader> reader = open_with_labels_per_batch(path, engine);
    std::vector<std::int32_t> range(100, -1);
    reader->read_labels(150, 100, range.data());
    for (std::int64_t k = 0; k < 100; ++k) REQUIRE(range[k] == held->labels()[150 + k]);
    REQUIRE_THROWS_AS(reader->read_labels(250, 51, range.data()), UsageError);
    std::int32_t max_label = -1;
    const std::uint64_t streamed = dataset_fingerprint(
        reader->info(), reader->info().num_samples,
        [&](std::int64_t first, std::int64_t count, std::int32_t* out) { reader->read_labels(first, count, out); },
        reader->lengths(), keys, &max_label);
    REQUIRE(streamed == expected);
    REQUIRE(max_label == 6);  // labels are i % 7
  }
}

TEST_CASE("open_reader reports what it found and reads only this rank's rows", "[mpi][io]") {
  const FixedCase test{"info_f32", ElementType::float32, H5T_IEEE_F32LE, {64, 4, 2}};
  const std::string path = make_file("info", [&](const std::string& p) {
    write_fixed_any(p, test, Layout{"chunked", 8, true});
  });
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, ReaderOptions{});
  const DatasetInfo& info = reader->info();
  REQUIRE(reader->engine() == "hdf5");
  REQUIRE(info.num_samples == 64);
  REQUIRE(info.sample_shape == std::vector<std::int64_t>{4, 2});
  REQUIRE(info.sample_bytes == 32);
  REQUIRE(info.layout == "chunked");
  REQUIRE(info.chunk_shape == std::vector<std::int64_t>{8, 4, 2});
  REQUIRE(info.compressed);
  REQUIRE(info.has_labels);
  REQUIRE(reader->labels().size() == 64);
  // Rows 0..7 share a chunk: one H5Dread, one chunk read.
  const std::vector<std::int64_t> batch = {7, 0, 3, 3};
  std::vector<float> out(4 * 8);
  reader->read(batch.data(), 4, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 128, nullptr, nullptr});
  const ReadStats stats = reader->stats();
  std::int64_t wrong =
      stats.read_calls == 1 && stats.useful_bytes == 128 && stats.bytes_read > 0 && stats.bytes_read < 128 * 8 ? 0 : 1;
  // Errors in read() are local and name the problem.
  try {
    const std::int64_t bad = 64;
    reader->read(&bad, 1, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 128, nullptr, nullptr});
    ++wrong;
  } catch (const UsageError& error) {
    if (std::string(error.what()).find("outside [0, 64)") == std::string::npos) ++wrong;
  }
  try {
    reader->read(batch.data(), 4, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 100, nullptr, nullptr});
    ++wrong;
  } catch (const UsageError&) {
  }
  REQUIRE(agreed_sum(wrong) == 0);
}

namespace {

/// open_reader must throw the same AgreedError on every rank; returns its message.
std::string agreed_failure(const std::string& path, const ReaderOptions& options = ReaderOptions{}) {
  try {
    open_reader(world(), path, options);
  } catch (const AgreedError& error) {
    return error.reason();
  }
  return "(no error)";
}

void require_failure(const std::string& path, const std::string& expected,
                     const ReaderOptions& options = ReaderOptions{}) {
  const std::string message = agreed_failure(path, options);
  INFO(message);
  const std::int64_t found = message.find(expected) != std::string::npos ? 1 : 0;
  REQUIRE(world().all_reduce(found, ReduceOp::min) == 1);
}

}  // namespace

TEST_CASE("unusable files fail on every rank with a reason", "[mpi][io][errors]") {
  const std::string folder = test_folder();
  require_failure(folder + "/missing.h5", "No such file");
  const std::string text = make_file("text", [](const std::string& p) { std::ofstream(p) << "not hdf5\n"; });
  require_failure(text, "not an HDF5 file");
  // Missing on one rank only (rank 1 looks elsewhere): nobody hangs.
  const std::string good = make_file("good", [](const std::string& p) {
    write_fixed_any(p, FixedCase{"", ElementType::float32, H5T_IEEE_F32LE, {10, 2}}, Layout{"contiguous"});
  });
  require_failure(world().rank() == 1 ? folder + "/elsewhere.h5" : good,
                  world().size() > 1 ? "No such file" : "(no error)");
  require_failure(good, "no dataset /nope", ReaderOptions{{"/nope"}});
  require_failure(good, "unknown engine", ReaderOptions{{}, "fast"});
  {
    ReaderOptions options;
    options.keys.labels = "/missing_labels";
    options.require_labels = true;
    require_failure(good, "no labels dataset /missing_labels", options);
  }
  const std::string short_labels = make_file("short_labels", [](const std::string& p) {
    H5File file = create_file(p);
    const std::vector<float> samples(20, 1.0f);
    const std::vector<std::int32_t> labels(9, 0);
    write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {10, 2}, samples.data(),
                  Layout{"contiguous"});
    write_dataset(file.get(), "/labels", H5T_STD_I32LE, H5T_NATIVE_INT32, {9}, labels.data(), Layout{"contiguous"});
  });
  require_failure(short_labels, "labels /labels has 9 entries but there are 10 samples");
  const std::string big_labels = make_file("big_labels", [](const std::string& p) {
    H5File file = create_file(p);
    const std::vector<float> samples(20, 1.0f);
    std::vector<std::int64_t> labels(10, 0);
    labels[4] = std::int64_t{1} << 40;
    write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {10, 2}, samples.data(),
                  Layout{"contiguous"});
    write_dataset(file.get(), "/labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {10}, labels.data(), Layout{"chunked", 4});
  });
  require_failure(big_labels, "/labels[4] = 1099511627776 does not fit int32");
  const std::string empty = make_file("empty", [](const std::string& p) {
    H5File file = create_file(p);
    write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {0, 2}, nullptr, Layout{"contiguous"});
  });
  require_failure(empty, "/samples is empty");
  const std::string float16 = make_file("float16", [](const std::string& p) {
    H5File file = create_file(p);
    H5Datatype half(STRIDER_H5_CHECK(H5Tcopy(H5T_IEEE_F32LE), "copy"));
    H5Tset_fields(half.get(), 15, 10, 5, 0, 10);
    H5Tset_size(half.get(), 2);
    H5Tset_ebias(half.get(), 15);
    const std::vector<float> samples(20, 1.0f);
    write_dataset(file.get(), "/samples", half.get(), H5T_NATIVE_FLOAT, {10, 2}, samples.data(), Layout{"contiguous"});
  });
  require_failure(float16, "unsupported type (2-byte float)");
  auto sequences_with = [](std::vector<std::int64_t> offsets, std::int64_t tokens) {
    return [offsets, tokens](const std::string& p) {
      H5File file = create_file(p);
      const std::vector<std::int32_t> values(static_cast<std::size_t>(tokens), 1);
      write_dataset(file.get(), "/tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, {static_cast<hsize_t>(tokens)},
                    values.data(), Layout{"contiguous"});
      write_dataset(file.get(), "/offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, {offsets.size()}, offsets.data(),
                    Layout{"contiguous"});
    };
  };
  require_failure(make_file("decreasing", sequences_with({0, 3, 2, 5}, 5)),
                  "/offsets is not non-decreasing: [1] = 3, [2] = 2");
  require_failure(make_file("past_end", sequences_with({0, 3, 4, 9}, 5)),
                  "/offsets[3] = 9 is past the end of /tokens (5 tokens)");
  require_failure(make_file("no_rows", sequences_with({0}, 5)), "the dataset is empty");
  const std::string tokens_only = make_file("tokens_only", [](const std::string& p) {
    H5File file = create_file(p);
    const std::vector<std::int32_t> values(5, 1);
    write_dataset(file.get(), "/tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, {5}, values.data(), Layout{"contiguous"});
  });
  require_failure(tokens_only, "has /tokens but no /offsets");
}

TEST_CASE("strider-gen's data can be learnt: features by a softmax, sequences by their tokens", "[mpi][io][gen]") {
  SyntheticOptions options;
  options.samples = 3000;
  options.classes = 10;
  options.dim = 16;
  options.seed = 5;
  const std::string features = test_folder() + "/learnable_features.h5";
  write_synthetic_dataset(world(), features, options);
  std::unique_ptr<BatchReader> reader = open_reader(world(), features, ReaderOptions{});
  const std::int64_t rows = reader->info().num_samples;
  std::vector<std::int64_t> all(static_cast<std::size_t>(rows));
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> x(static_cast<std::size_t>(rows * options.dim));
  std::vector<std::int32_t> y(all.size());
  reader->read(
      all.data(), rows,
      BatchDestination{reinterpret_cast<std::byte*>(x.data()), rows * reader->info().sample_bytes, y.data(), nullptr});
  // Softmax regression, plain SGD; every fifth row is held out.
  const std::int64_t k = options.classes, d = options.dim;
  std::vector<double> weights(static_cast<std::size_t>(k * (d + 1)), 0.0), scores(static_cast<std::size_t>(k));
  auto score = [&](std::int64_t row) {
    for (std::int64_t c = 0; c < k; ++c) {
      double sum = weights[c * (d + 1) + d];
      for (std::int64_t j = 0; j < d; ++j) sum += weights[c * (d + 1) + j] * x[row * d + j];
      scores[c] = sum;
    }
  };
  std::mt19937_64 engine(1);
  for (int epoch = 0; epoch < 5; ++epoch) {
    std::shuffle(all.begin(), all.end(), engine);
    for (std::int64_t row : all) {
      if (row % 5 == 0) continue;
      score(row);
      const double top = *std::max_element(scores.begin(), scores.end());
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - top));
      for (std::int64_t c = 0; c < k; ++c) {
        const double gradient = scores[c] / total - (c == y[row] ? 1.0 : 0.0);
        for (std::int64_t j = 0; j < d; ++j) weights[c * (d + 1) + j] -= 0.05 * gradient * x[row * d + j];
        weights[c * (d + 1) + d] -= 0.05 * gradient;
      }
    }
  }
  std::int64_t right = 0, tested = 0;
  for (std::int64_t row = 0; row < rows; row += 5, ++tested) {
    score(row);
    right += std::max_element(scores.begin(), scores.end()) - scores.begin() == y[row] ? 1 : 0;
  }
  const double features_accuracy = static_cast<double>(right) / static_cast<double>(tested);

  options.kind = "sequences";
  options.samples = 500;
  const std::string sequences = test_folder() + "/learnable_sequences.h5";
  write_synthetic_dataset(world(), sequences, options);
  std::unique_ptr<BatchReader> sequence_reader = open_reader(world(), sequences, ReaderOptions{});
  std::int64_t voted_right = 0;
  for (std::int64_t row = 0; row < options.samples; ++row) {
    const std::int64_t bytes = sequence_reader->samples_bytes(&row, 1);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(bytes / 4));
    std::int32_t label = -1;
    sequence_reader->read(&row, 1,
                          BatchDestination{reinterpret_cast<std::byte*>(tokens.data()), bytes, &label, nullptr});
    std::vector<std::int64_t> votes(static_cast<std::size_t>(k), 0);
    for (std::int32_t token : tokens) ++votes[token % k];
    voted_right += std::max_element(votes.begin(), votes.end()) - votes.begin() == label ? 1 : 0;
  }
  const double sequences_accuracy = static_cast<double>(voted_right) / static_cast<double>(options.samples);
  INFO("features " << features_accuracy << ", sequences " << sequences_accuracy);
  REQUIRE(world().all_reduce(features_accuracy, ReduceOp::min) >= 0.9);
  REQUIRE(world().all_reduce(sequences_accuracy, ReduceOp::min) >= 0.9);
}
