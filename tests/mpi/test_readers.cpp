// The readers against the values the test wrote, for every engine, several types and shapes (one
// stored big-endian), contiguous / chunked / compressed, fixed and variable length, at 1..4 ranks,
// with duplicates and empty batches; and the bad inputs open_reader must refuse on every rank.
// Files are written by rank 0 with the HDF5 C API from values the test computes on every rank, with
// explicit file types (H5T_STD_*, H5T_IEEE_*) and memory types the test names itself; the expected
// bytes are those values in native byte order, never a read through strider's own type mapping.
// Checks of local values agree across ranks (REQUIRE_ON_ALL_RANKS), so no rank is left in a collective.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "io/chunk_inflate.hpp"
#include "mpi_test_support.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/io/hdf5_handle.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/train/fingerprint.hpp"

using namespace strider;
using strider::testing::world;

namespace {

/// A scratch folder made by rank 0 and known to every rank; rank 0 removes it, with its files, when
/// the process exits (after every rank has passed the tests' last collective).
class ScratchFolder {
 public:
  ScratchFolder() {
    if (world().is_root()) {
      char name[] = "/tmp/strider_readers_XXXXXX";
      if (mkdtemp(name) != nullptr) {
        path_ = name;
        owned_ = true;
      }
    }
    world().broadcast(path_);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    if (owned_) std::filesystem::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_ = "/tmp";
  bool owned_ = false;
};

const std::string& test_folder() {
  static const ScratchFolder folder;
  return folder.path();
}

struct Layout {
  std::string name;        // contiguous | chunked | deflate* | compact
  hsize_t chunk_rows = 0;  // along dimension 0
  bool deflate = false;
  bool shuffle = false;     // HDF5's shuffle filter before deflate (h5py's shuffle=True)
  bool split_rows = false;  // chunks one element wide beyond dimension 0: a row spans several
  bool checksum = false;    // fletcher32 after deflate (h5py's fletcher32=True)
};

/// Every layout the README lists (compact datasets hold at most 64 KiB: the test files are small).
/// Deflate alone and shuffle + deflate over whole rows are inflated by the hdf5 engine itself; split
/// rows and a checksum go through HDF5's filters.
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"contiguous", 0, false},
      {"chunked", 7, false},
      {"deflate", 16, true},
      {"compact", 0, false},
      {"deflate_shuffle", 16, true, true},
      {"deflate_split_rows", 16, true, false, true},
      {"deflate_checksum", 16, true, false, false, true},
  };
  return all;
}

/// The line direct and mmap refuse a layout with (README: they never convert silently).
std::string layout_refusal(const Layout& layout) {
  if (layout.name == "chunked") return "/samples is chunked (use --engine hdf5 or auto)";
  if (layout.deflate) return "/samples is chunked and compressed (use --engine hdf5 or auto)";
  if (layout.name == "compact") return "/samples is compact (use --engine hdf5 or auto)";
  return "";
}

/// Writes a dataset from native values of type mem_type, stored as file_type.
void write_dataset(hid_t file, const std::string& key, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* values, const Layout& layout) {
  H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), key));
  H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), key));
  if (layout.name == "compact") STRIDER_H5_CHECK(H5Pset_layout(create.get(), H5D_COMPACT), key);
  if (layout.chunk_rows > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::min<hsize_t>(layout.chunk_rows, std::max<hsize_t>(1, dims[0]));
    if (layout.split_rows)
      for (std::size_t d = 1; d < chunk.size(); ++d) chunk[d] = 1;
    STRIDER_H5_CHECK(H5Pset_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data()), key);
    if (layout.shuffle) STRIDER_H5_CHECK(H5Pset_shuffle(create.get()), key);
    if (layout.deflate) STRIDER_H5_CHECK(H5Pset_deflate(create.get(), 4), key);
    if (layout.checksum) STRIDER_H5_CHECK(H5Pset_fletcher32(create.get()), key);
  }
  H5Dataset dataset(STRIDER_H5_CHECK(
      H5Dcreate2(file, key.c_str(), file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), key));
  STRIDER_H5_CHECK(H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), key);
}

/// `alignment` > 0: objects of at least that many bytes start at multiples of it (H5Pset_alignment).
H5File create_file(const std::string& path, hsize_t alignment = 0) {
  H5PropertyList access(STRIDER_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), path));
  if (alignment > 0) STRIDER_H5_CHECK(H5Pset_alignment(access.get(), alignment, alignment), path);
  return H5File(STRIDER_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), path));
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

/// The HDF5 memory type of a C++ element type, named by the test.
template <typename T>
hid_t memory_type_of() {
  if constexpr (std::is_same_v<T, std::int8_t>) return H5T_NATIVE_INT8;
  if constexpr (std::is_same_v<T, std::uint8_t>) return H5T_NATIVE_UINT8;
  if constexpr (std::is_same_v<T, std::int16_t>) return H5T_NATIVE_INT16;
  if constexpr (std::is_same_v<T, std::uint16_t>) return H5T_NATIVE_UINT16;
  if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
  if constexpr (std::is_same_v<T, std::uint32_t>) return H5T_NATIVE_UINT32;
  if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
  if constexpr (std::is_same_v<T, std::uint64_t>) return H5T_NATIVE_UINT64;
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
}

/// IEEE 754 binary16 in the given byte order, as h5py builds np.float16's type (float32's fields
/// narrowed); created once per process, never closed.
hid_t test_half_type(bool big_endian) {
  static const auto make = [](hid_t base) {
    const hid_t half = H5Tcopy(base);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    return half;
  };
  static const hid_t little = make(H5T_IEEE_F32LE), big = make(H5T_IEEE_F32BE);
  return big_endian ? big : little;
}

/// What a test file holds, as the test wrote it; every rank computes it. A reader must deliver
/// these bytes (native byte order, whatever the file's order) and report this element type.
struct WrittenData {
  ElementType element = ElementType::float32;
  hid_t memory_type = -1;         // the HDF5 memory type the values were written from
  std::size_t element_size = 0;   // bytes of one element in memory
  std::vector<std::byte> values;  // every element, row after row
  std::int64_t rows = 0;
  std::int64_t row_elements = 0;      // fixed-size rows: elements per row
  std::vector<std::int64_t> offsets;  // sequences: rows + 1 element offsets
  int label_modulus = 7;              // the label of row i is i % label_modulus

  bool variable_length() const { return !offsets.empty(); }
  std::int64_t row_length(std::int64_t row) const {
    return variable_length() ? offsets[static_cast<std::size_t>(row) + 1] - offsets[static_cast<std::size_t>(row)]
                             : row_elements;
  }
  /// The bytes of `batch`'s rows, in batch order.
  std::vector<std::byte> expected_bytes(const std::vector<std::int64_t>& batch) const {
    std::vector<std::byte> bytes;
    for (std::int64_t row : batch) {
      const std::int64_t first = variable_length() ? offsets[static_cast<std::size_t>(row)] : row * row_elements;
      const auto begin = values.begin() + static_cast<std::ptrdiff_t>(first * static_cast<std::int64_t>(element_size));
      bytes.insert(bytes.end(), begin,
                   begin + static_cast<std::ptrdiff_t>(row_length(row) * static_cast<std::int64_t>(element_size)));
    }
    return bytes;
  }
};

/// make_values<T> for `rows` rows of `row_elements`, as bytes.
template <typename T>
WrittenData written_values(ElementType element, std::int64_t rows, std::int64_t row_elements) {
  WrittenData data;
  data.element = element;
  data.memory_type = memory_type_of<T>();
  data.element_size = sizeof(T);
  data.rows = rows;
  data.row_elements = row_elements;
  const std::vector<T> values = make_values<T>(rows * row_elements);
  data.values.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(data.values.data(), values.data(), data.values.size());
  return data;
}

/// One fixed-size test file: samples of `element`, stored as file_type, plus int64 labels i % 7.
struct FixedCase {
  std::string name;
  ElementType element;
  hid_t file_type;
  std::vector<hsize_t> dims;
};

WrittenData fixed_data(const FixedCase& test) {
  const auto rows = static_cast<std::int64_t>(test.dims[0]);
  std::int64_t row_elements = 1;
  for (std::size_t d = 1; d < test.dims.size(); ++d) row_elements *= static_cast<std::int64_t>(test.dims[d]);
  switch (test.element) {
    case ElementType::int8:
      return written_values<std::int8_t>(test.element, rows, row_elements);
    case ElementType::uint8:
      return written_values<std::uint8_t>(test.element, rows, row_elements);
    case ElementType::int16:
      return written_values<std::int16_t>(test.element, rows, row_elements);
    case ElementType::uint16:
      return written_values<std::uint16_t>(test.element, rows, row_elements);
    case ElementType::int32:
      return written_values<std::int32_t>(test.element, rows, row_elements);
    case ElementType::uint32:
      return written_values<std::uint32_t>(test.element, rows, row_elements);
    case ElementType::int64:
      return written_values<std::int64_t>(test.element, rows, row_elements);
    case ElementType::uint64:
      return written_values<std::uint64_t>(test.element, rows, row_elements);
    case ElementType::float32:
      return written_values<float>(test.element, rows, row_elements);
    case ElementType::float64:
      return written_values<double>(test.element, rows, row_elements);
    case ElementType::float16: {
      // Bit patterns the test picks (normals, subnormals, both signs; no infinity or NaN), written
      // from memory as little-endian halves: the reader must deliver these bits.
      WrittenData data = written_values<std::uint16_t>(test.element, rows, row_elements);
      data.memory_type = test_half_type(false);
      for (std::int64_t i = 0; i < rows * row_elements; ++i) {
        const auto bits = static_cast<std::uint16_t>((static_cast<std::uint64_t>(i) * 2654435761u >> 7) % 0x7c00 |
                                                     (i % 3 == 1 ? 0x8000 : 0));
        std::memcpy(data.values.data() + i * 2, &bits, 2);
      }
      return data;
    }
  }
  return WrittenData{};
}

/// `alignment`: see create_file. `labels_first`: the samples are the file's last dataset.
void write_fixed(const std::string& path, const FixedCase& test, const WrittenData& data, const Layout& layout,
                 hsize_t alignment = 0, bool labels_first = false) {
  H5File file = create_file(path, alignment);
  std::vector<std::int64_t> labels(test.dims[0]);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 7);
  const auto write_labels = [&] {
    write_dataset(file.get(), "/labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {test.dims[0]}, labels.data(), layout);
  };
  if (labels_first) write_labels();
  write_dataset(file.get(), "/samples", test.file_type, data.memory_type, test.dims, data.values.data(), layout);
  if (!labels_first) write_labels();
}

void write_fixed_any(const std::string& path, const FixedCase& test, const Layout& layout) {
  write_fixed(path, test, fixed_data(test), layout);
}

/// Sequences: int32 tokens [T] and int64 offsets [N+1], lengths 0..12 (some empty), labels i % 5.
WrittenData sequence_data(std::int64_t rows) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t i = 0; i < rows; ++i) offsets[i + 1] = offsets[i] + (i * 7 + 3) % 13;
  WrittenData data = written_values<std::int32_t>(ElementType::int32, 1, offsets.back());
  data.rows = rows;
  data.row_elements = 0;
  data.offsets = offsets;
  data.label_modulus = 5;
  return data;
}

void write_sequences(const std::string& path, const WrittenData& data, const Layout& layout) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(data.rows));
  for (std::int64_t i = 0; i < data.rows; ++i) labels[i] = static_cast<std::int32_t>(i % 5);
  H5File file = create_file(path);
  write_dataset(file.get(), "/tokens", H5T_STD_I32LE, data.memory_type, {static_cast<hsize_t>(data.offsets.back())},
                data.values.data(), layout);
  write_dataset(file.get(), "/offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, {data.offsets.size()}, data.offsets.data(),
                layout);
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
  // Rows in file order, each once (the hdf5 engine reads these straight into the batch): all of
  // them, and every third (runs of one row: several reads, each at its place in the batch).
  std::vector<std::int64_t> in_order, every_third;
  for (std::int64_t i = 0; i < rows; ++i) in_order.push_back(i);
  for (std::int64_t i = 1; i < rows; i += 3) every_third.push_back(i);
  batches.push_back(in_order);
  batches.push_back(every_third);
  return batches;
}

/// Collective: reads every test batch with `options` and counts what differs from `data` (this
/// rank's count). labels_in_memory false: labels are read per batch where the file allows
/// (*labels_per_batch says). `destination_offset` >= 0: the batch lands that many bytes past a
/// 4 KiB boundary (else wherever a vector puts it). Reads are local: a failure on one rank is agreed
/// before the reader, whose close is collective, goes away.
std::int64_t mismatches(const std::string& path, const ReaderOptions& options, const WrittenData& data,
                        std::string* chosen_engine, bool* labels_per_batch = nullptr,
                        std::int64_t destination_offset = -1) {
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
  return world().collective_try([&] {
    *chosen_engine = reader->engine();
    const DatasetInfo& info = reader->info();
    if (labels_per_batch != nullptr) *labels_per_batch = info.labels_per_batch;
    std::int64_t wrong = 0;
    if (info.element_type != data.element || info.num_samples != data.rows ||
        info.variable_length != data.variable_length())
      ++wrong;
    // Labels read per batch are not held; held labels are all there.
    if (reader->labels().size() != (info.labels_per_batch ? 0u : static_cast<std::size_t>(data.rows))) ++wrong;
    if (data.variable_length()) {
      if (reader->lengths().size() != static_cast<std::size_t>(data.rows)) return wrong + 1;
      for (std::int64_t row = 0; row < data.rows; ++row)
        if (reader->lengths()[static_cast<std::size_t>(row)] != data.row_length(row)) ++wrong;
    }
    for (const auto& batch : test_batches(data.rows)) {
      const auto count = static_cast<std::int64_t>(batch.size());
      const std::vector<std::byte> expected = data.expected_bytes(batch);
      const std::int64_t bytes = reader->samples_bytes(batch.data(), count);
      if (bytes != static_cast<std::int64_t>(expected.size())) ++wrong;
      std::vector<std::byte> memory(static_cast<std::size_t>(bytes + 2 * kDirectIoAlignmentBytes));
      std::byte* samples = memory.data();
      if (destination_offset >= 0) {
        const auto address = reinterpret_cast<std::uintptr_t>(samples);
        const auto alignment = static_cast<std::uintptr_t>(kDirectIoAlignmentBytes);
        samples += (alignment - address % alignment) % alignment + static_cast<std::uintptr_t>(destination_offset);
      }
      std::vector<std::int32_t> labels(batch.size() + 1, -1);
      std::vector<std::int64_t> offsets(batch.size() + 1, -1);
      reader->read(batch.data(), count, BatchDestination{samples, bytes, labels.data(), offsets.data()});
      if (!expected.empty() && std::memcmp(expected.data(), samples, expected.size()) != 0) ++wrong;
      for (std::size_t k = 0; k < batch.size(); ++k) {
        if (labels[k] != batch[k] % data.label_modulus) ++wrong;
        if (!info.labels_per_batch && reader->labels()[batch[k]] != batch[k] % data.label_modulus) ++wrong;
      }
      if (data.variable_length()) {
        std::int64_t at = 0;
        for (std::size_t k = 0; k < batch.size(); ++k) {
          if (offsets[k] != at) ++wrong;
          at += data.row_length(batch[k]);
        }
        if (offsets[batch.size()] != at) ++wrong;
      }
    }
    const ReadStats stats = reader->stats();
    if (stats.batches != static_cast<std::int64_t>(test_batches(data.rows).size())) ++wrong;
    return wrong;
  });
}

std::int64_t agreed_sum(std::int64_t value) {
  return world().all_reduce(value, ReduceOp::sum);
}

/// Collective: whether open_reader refuses `path` with `options` (the same AgreedError on every rank).
bool open_refused(const std::string& path, const ReaderOptions& options) {
  try {
    open_reader(world(), path, options);
  } catch (const AgreedError&) {
    return true;
  }
  return false;
}

/// Collective: the reason open_reader refuses `path` with `options` on every rank, or "(no error)".
std::string refusal_reason(const std::string& path, const ReaderOptions& options) {
  try {
    open_reader(world(), path, options);
  } catch (const AgreedError& error) {
    return error.reason();
  }
  return "(no error)";
}

/// Every engine against the values written to `path`, labels held and per batch. `refusal`: empty
/// when direct and mmap can read the data, else the end of the line they are refused with on every
/// rank (and auto picks hdf5); `labels_raw`: the labels can be read per batch (else they are held
/// even when asked not to be).
void check_every_engine(const std::string& path, const std::string& refusal, bool labels_raw, const WrittenData& data) {
  const bool raw = refusal.empty();
  for (const std::string engine : {"hdf5", "direct", "mmap", "auto"}) {
    INFO("engine " << engine);
    if (!raw && (engine == std::string("direct") || engine == std::string("mmap"))) {
      const std::string reason = refusal_reason(path, ReaderOptions{{}, engine});
      const std::string expected = "the " + engine + " engine cannot read " + path + ": " + refusal;
      INFO(reason);
      REQUIRE_ON_ALL_RANKS(reason.find(expected) != std::string::npos);
      continue;
    }
    for (const bool labels_in_memory : {true, false}) {
      CAPTURE(labels_in_memory);
      ReaderOptions options;
      options.engine = engine;
      // mmap copies and hdf5 inflates its deflate chunks on 3 threads; auto (hdf5 or mmap) on 1.
      options.copy_threads = engine == "mmap" || engine == "hdf5" ? 3 : 1;
      options.labels_in_memory = labels_in_memory;
      std::string chosen;
      bool per_batch = false;
      REQUIRE_ON_ALL_RANKS(agreed_sum(mismatches(path, options, data, &chosen, &per_batch)) == 0);
      REQUIRE_ON_ALL_RANKS(per_batch == (!labels_in_memory && labels_raw));
      if (engine == std::string("auto")) REQUIRE_ON_ALL_RANKS(chosen == (raw ? "mmap" : "hdf5"));
    }
  }
}

/// DatasetInfo::compression for a test file of `layout` (rows of one element: chunks cannot split them).
std::string expected_compression(const Layout& layout, bool big_endian, bool scalar_rows) {
  if (!layout.deflate) return "";
  const std::string filters =
      std::string(layout.shuffle ? "shuffle + " : "") + "deflate" + (layout.checksum ? " + fletcher32" : "");
  if (layout.checksum) return filters + ", through HDF5's filters (filters other than deflate, after shuffle or alone)";
  if (big_endian) return filters + ", through HDF5's filters (a non-native byte order)";
  if (layout.split_rows && !scalar_rows) return filters + ", through HDF5's filters (chunks that split each row)";
  return filters + ", inflated by strider with " + io_detail::ChunkInflater::library();
}

/// Opens `path` with `engine`, labels read per batch (which the file must allow).
std::unique_ptr<BatchReader> open_with_labels_per_batch(const std::string& path, const std::string& engine) {
  ReaderOptions options;
  options.engine = engine;
  options.labels_in_memory = false;
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
  REQUIRE_ON_ALL_RANKS(reader->info().labels_per_batch);
  return reader;
}

}  // namespace

TEST_CASE("every engine reads the fixed-size samples the test wrote", "[mpi][io]") {
  // Every element type the README lists, both byte orders (native is little-endian here).
  const std::vector<FixedCase> cases = {
      {"f32", ElementType::float32, H5T_IEEE_F32LE, {300, 8}},
      {"f32_big_endian", ElementType::float32, H5T_IEEE_F32BE, {80, 5}},
      {"f64_big_endian", ElementType::float64, H5T_IEEE_F64BE, {60, 2}},
      {"u8_image", ElementType::uint8, H5T_STD_U8LE, {120, 3, 4, 5}},
      {"i8", ElementType::int8, H5T_STD_I8LE, {150, 5}},
      {"i16_big_endian", ElementType::int16, H5T_STD_I16BE, {200, 7}},
      {"u16", ElementType::uint16, H5T_STD_U16LE, {130, 6}},
      {"i32", ElementType::int32, H5T_STD_I32LE, {110, 4}},
      {"u32", ElementType::uint32, H5T_STD_U32LE, {90, 3}},
      {"f64_scalar_rows", ElementType::float64, H5T_IEEE_F64LE, {257}},
      {"i64", ElementType::int64, H5T_STD_I64LE, {100, 2}},
      {"u64", ElementType::uint64, H5T_STD_U64LE, {70, 3}},
      {"f16", ElementType::float16, test_half_type(false), {150, 6}},
      {"f16_big_endian", ElementType::float16, test_half_type(true), {70, 2, 3}},
  };
  for (const FixedCase& test : cases) {
    const bool big_endian = H5Tget_order(test.file_type) == H5T_ORDER_BE;
    for (const Layout& layout : layouts()) {
      const std::string path =
          make_file(test.name + "_" + layout.name, [&](const std::string& p) { write_fixed_any(p, test, layout); });
      INFO(test.name << " " << layout.name);
      std::string refusal = layout_refusal(layout);
      if (refusal.empty() && big_endian)
        refusal = std::string("/samples is stored as a non-native ") + element_name(test.element) +
                  " (other byte order) (use --engine hdf5 or auto)";
      // The labels are int64 little-endian with the data's layout: per batch only when contiguous.
      check_every_engine(path, refusal, layout.name == "contiguous", fixed_data(test));
      REQUIRE_ON_ALL_RANKS(open_reader(world(), path, ReaderOptions{})->info().compression ==
                           expected_compression(layout, big_endian, test.dims.size() == 1));
    }
  }
}

/// Collective: reads `rows` with `reader` (a local read, agreed after) and returns the message of the
/// `Failure` it threw, or `if_read` when it read them.
template <typename Failure = DataError>
std::string failure_of_read(BatchReader& reader, const std::vector<std::int64_t>& rows,
                            const BatchDestination& destination, const std::string& if_read) {
  return world().collective_try([&] {
    try {
      reader.read(rows.data(), static_cast<std::int64_t>(rows.size()), destination);
    } catch (const Failure& failure) {
      return std::string(failure.what());
    }
    return if_read;
  });
}

/// Chunks as writers leave them: rows 100 x 6 float32 in chunks of 16 rows, deflate (after shuffle
/// when `shuffle`); chunk 2 stored with every filter skipped (its filter mask says so: HDF5 does
/// this when an optional filter fails), chunk 4 never written (its rows read as the fill value, 0),
/// and with `damage_chunk` >= 0 that chunk's stored stream damaged in its middle (`oversize`: replaced
/// by 4 KiB of junk, more than any deflate stream of the chunk). Returns what a reader must deliver.
WrittenData write_chunks_as_left(const std::string& path, bool shuffle, int damage_chunk, bool oversize = false) {
  constexpr hsize_t kRows = 100, kWidth = 6, kChunkRows = 16;
  WrittenData data = written_values<float>(ElementType::float32, kRows, kWidth);
  const std::size_t row_bytes = kWidth * sizeof(float);
  std::fill(data.values.begin() + 64 * row_bytes, data.values.begin() + 80 * row_bytes, std::byte{0});
  H5File file = create_file(path);
  const std::vector<hsize_t> dims = {kRows, kWidth}, chunk = {kChunkRows, kWidth};
  H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(2, dims.data(), nullptr), path));
  H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), path));
  STRIDER_H5_CHECK(H5Pset_chunk(create.get(), 2, chunk.data()), path);
  if (shuffle) STRIDER_H5_CHECK(H5Pset_shuffle(create.get()), path);
  STRIDER_H5_CHECK(H5Pset_deflate(create.get(), 4), path);
  H5Dataset samples(STRIDER_H5_CHECK(
      H5Dcreate2(file.get(), "/samples", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), path));
  for (hsize_t first : {hsize_t{0}, hsize_t{48}, hsize_t{80}}) {  // rows 0..31, 48..63, 80..99
    const hsize_t start[2] = {first, 0}, count[2] = {first == 0 ? 32 : first == 48 ? 16 : kRows - 80, kWidth};
    STRIDER_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), path);
    H5Dataspace memory(STRIDER_H5_CHECK(H5Screate_simple(2, count, nullptr), path));
    STRIDER_H5_CHECK(H5Dwrite(samples.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT,
                              data.values.data() + first * row_bytes),
                     path);
  }
  const hsize_t raw_chunk[2] = {32, 0};
  const std::uint32_t all_skipped = shuffle ? 3u : 1u;
  STRIDER_H5_CHECK(H5Dwrite_chunk(samples.get(), H5P_DEFAULT, all_skipped, raw_chunk, kChunkRows * row_bytes,
                                  data.values.data() + 32 * row_bytes),
                   path);
  if (damage_chunk >= 0) {
    const hsize_t at[2] = {static_cast<hsize_t>(damage_chunk) * kChunkRows, 0};
    hsize_t stored = 0;
    STRIDER_H5_CHECK(H5Dget_chunk_storage_size(samples.get(), at, &stored), path);
    std::vector<unsigned char> bytes(stored);
    std::uint32_t mask = 0;
    STRIDER_H5_CHECK(H5Dread_chunk(samples.get(), H5P_DEFAULT, at, &mask, bytes.data()), path);
    for (std::size_t i = stored / 3; i < stored / 3 + 16; ++i) bytes[i] ^= 0x5a;
    if (oversize) bytes.assign(4096, 0x5a);
    STRIDER_H5_CHECK(H5Dwrite_chunk(samples.get(), H5P_DEFAULT, mask, at, bytes.size(), bytes.data()), path);
  }
  std::vector<std::int64_t> labels(kRows);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 7);
  write_dataset(file.get(), "/labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {kRows}, labels.data(), layouts()[0]);
  return data;
}

TEST_CASE("the hdf5 engine inflates chunks itself: chunks stored unfiltered, never written, or damaged",
          "[mpi][io][inflate]") {
  for (const bool shuffle : {false, true}) {
    CAPTURE(shuffle);
    const std::string name = shuffle ? "as_left_shuffled" : "as_left";
    WrittenData data;
    const std::string path =
        make_file(name, [&](const std::string& p) { data = write_chunks_as_left(p, shuffle, -1); });
    data = written_values<float>(ElementType::float32, 100, 6);  // every rank: what rank 0 wrote
    std::fill(data.values.begin() + 64 * 24, data.values.begin() + 80 * 24, std::byte{0});
    ReaderOptions options{{}, "hdf5"};
    options.copy_threads = shuffle ? 3 : 1;  // chunks inflated on this thread, or on 3 at once
    std::string chosen;
    REQUIRE_ON_ALL_RANKS(agreed_sum(mismatches(path, options, data, &chosen)) == 0);

    // A damaged stream is named with its chunk and rows: strider inflated it, not HDF5's filter.
    const std::string damaged =
        make_file(name + "_damaged", [&](const std::string& p) { write_chunks_as_left(p, shuffle, 1); });
    std::unique_ptr<BatchReader> reader = open_reader(world(), damaged, options);
    std::vector<float> out(6 * 5);
    const BatchDestination destination{reinterpret_cast<std::byte*>(out.data()),
                                       static_cast<std::int64_t>(out.size() * sizeof(float)), nullptr, nullptr};
    const std::int64_t fine[] = {3, 40};  // chunks 0 and 2
    world().collective_try([&] { reader->read(fine, 2, destination); });
    // chunk 1 is the damaged one, among others
    const std::string message =
        failure_of_read(*reader, {3, 20, 40, 41, 99}, destination, "(the damaged chunk was read)");
    INFO(message);
    REQUIRE_ON_ALL_RANKS(message.find("chunk 1 (rows 16..31 of") != std::string::npos);
    REQUIRE_ON_ALL_RANKS(message.find("do not inflate to the chunk's 384 bytes") != std::string::npos);

    // A stored size no deflate stream of the chunk can have is refused before anything is allocated.
    const std::string oversize =
        make_file(name + "_oversize", [&](const std::string& p) { write_chunks_as_left(p, shuffle, 1, true); });
    std::unique_ptr<BatchReader> junk = open_reader(world(), oversize, options);
    const std::string refusal = failure_of_read(*junk, {20}, destination, "(the oversized chunk was read)");
    INFO(refusal);
    REQUIRE_ON_ALL_RANKS(refusal.find("chunk 1 (rows 16..31 of") != std::string::npos);
    REQUIRE_ON_ALL_RANKS(refusal.find("stored in 4096 bytes, more than deflate makes of the chunk's 384") !=
                         std::string::npos);
  }
}

TEST_CASE("chunks read whole and then in part: what the engine keeps from one read is the chunk it names",
          "[mpi][io][inflate]") {
  // 96 rows in 6 whole chunks of 16: a read in order inflates every chunk straight into the batch;
  // the next reads want parts of chunks, the last one first.
  const FixedCase test{"whole_chunks", ElementType::float32, H5T_IEEE_F32LE, {96, 6}};
  const std::string path =
      make_file("whole_chunks", [&](const std::string& p) { write_fixed_any(p, test, layouts()[2]); });
  const WrittenData data = fixed_data(test);
  for (const int threads : {1, 3}) {
    CAPTURE(threads);
    ReaderOptions options{{}, "hdf5"};
    options.copy_threads = threads;
    std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
    std::vector<std::int64_t> in_order(96);
    std::iota(in_order.begin(), in_order.end(), std::int64_t{0});
    const std::vector<std::vector<std::int64_t>> batches = {
        in_order, {95, 80}, {1, 17, 33, 49, 65, 81}, {90}, in_order};
    const std::int64_t wrong = world().collective_try([&] {
      std::int64_t differ = 0;
      for (const auto& batch : batches) {
        const std::vector<std::byte> expected = data.expected_bytes(batch);
        std::vector<std::byte> got(expected.size());
        reader->read(batch.data(), static_cast<std::int64_t>(batch.size()),
                     BatchDestination{got.data(), static_cast<std::int64_t>(got.size()), nullptr, nullptr});
        if (got != expected) ++differ;
      }
      return differ;
    });
    REQUIRE_ON_ALL_RANKS(wrong == 0);
  }
}

TEST_CASE("a sequence file's tokens are inflated by the hdf5 engine: a damaged chunk names its tokens",
          "[mpi][io][inflate]") {
  const WrittenData data = sequence_data(60);
  const std::string path = make_file("tokens_damaged", [&](const std::string& p) {
    write_sequences(p, data, layouts()[2]);  // deflate, chunks of 16 tokens
    H5File file(STRIDER_H5_CHECK(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), p));
    H5Dataset tokens(STRIDER_H5_CHECK(H5Dopen2(file.get(), "/tokens", H5P_DEFAULT), p));
    const hsize_t at[1] = {16};  // chunk 1
    hsize_t stored = 0;
    STRIDER_H5_CHECK(H5Dget_chunk_storage_size(tokens.get(), at, &stored), p);
    std::vector<unsigned char> bytes(stored);
    std::uint32_t mask = 0;
    STRIDER_H5_CHECK(H5Dread_chunk(tokens.get(), H5P_DEFAULT, at, &mask, bytes.data()), p);
    for (std::size_t i = stored / 3; i < stored / 3 + 8; ++i) bytes[i] ^= 0x5a;
    STRIDER_H5_CHECK(H5Dwrite_chunk(tokens.get(), H5P_DEFAULT, mask, at, stored, bytes.data()), p);
  });
  std::int64_t in_chunk_1 = -1, in_chunk_0 = -1;  // a sequence with tokens in chunk 1, one only in chunk 0
  for (std::int64_t row = 0; row < data.rows; ++row) {
    const std::int64_t first = data.offsets[row], last = data.offsets[row + 1] - 1;
    if (last >= first && last < 16 && in_chunk_0 < 0) in_chunk_0 = row;
    if (last >= first && first >= 16 && last < 32 && in_chunk_1 < 0) in_chunk_1 = row;
  }
  REQUIRE(in_chunk_0 >= 0);
  REQUIRE(in_chunk_1 >= 0);
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, ReaderOptions{{}, "hdf5"});
  std::vector<std::byte> out(64 * sizeof(std::int32_t));
  const BatchDestination destination{out.data(), static_cast<std::int64_t>(out.size()), nullptr, nullptr};
  world().collective_try([&] { reader->read(&in_chunk_0, 1, destination); });
  const std::string message = failure_of_read(*reader, {in_chunk_1}, destination, "(the damaged chunk was read)");
  INFO(message);
  REQUIRE_ON_ALL_RANKS(message.find("chunk 1 (tokens 16..31 of /tokens in " + path + ")") != std::string::npos);
  REQUIRE_ON_ALL_RANKS(message.find("do not inflate to the chunk's 64 bytes") != std::string::npos);
}

TEST_CASE("a chunk whose fletcher32 checksum does not match is refused, not inflated past it", "[mpi][io][inflate]") {
  // deflate then fletcher32 (h5py's compression="gzip", fletcher32=True): HDF5's filters check each
  // chunk's checksum, which strider's own inflation would skip, so such files go through HDF5.
  const FixedCase test{"checksummed", ElementType::float32, H5T_IEEE_F32LE, {40, 6}};
  const std::string path = make_file("checksummed", [&](const std::string& p) {
    write_fixed_any(p, test, layouts()[6]);
    H5File file(STRIDER_H5_CHECK(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), p));
    H5Dataset samples(STRIDER_H5_CHECK(H5Dopen2(file.get(), "/samples", H5P_DEFAULT), p));
    const hsize_t at[2] = {16, 0};  // chunk 1
    hsize_t stored = 0;
    STRIDER_H5_CHECK(H5Dget_chunk_storage_size(samples.get(), at, &stored), p);
    std::vector<unsigned char> bytes(stored);
    std::uint32_t mask = 0;
    STRIDER_H5_CHECK(H5Dread_chunk(samples.get(), H5P_DEFAULT, at, &mask, bytes.data()), p);
    bytes.back() ^= 0x01;  // the checksum's last byte; the deflate stream is intact
    STRIDER_H5_CHECK(H5Dwrite_chunk(samples.get(), H5P_DEFAULT, mask, at, stored, bytes.data()), p);
  });
  REQUIRE(layouts()[6].checksum);
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, ReaderOptions{{}, "hdf5"});
  std::vector<float> out(6);
  const BatchDestination destination{reinterpret_cast<std::byte*>(out.data()), 24, nullptr, nullptr};
  const std::int64_t fine = 3;
  world().collective_try([&] { reader->read(&fine, 1, destination); });
  const std::string outcome = failure_of_read<Error>(*reader, {20}, destination, "(read past the checksum)");
  INFO(outcome);
  REQUIRE_ON_ALL_RANKS(outcome != "(read past the checksum)");
}

TEST_CASE("every engine reads the variable-length sequences the test wrote", "[mpi][io]") {
  const WrittenData data = sequence_data(333);
  for (const Layout& layout : layouts()) {
    const std::string path =
        make_file("sequences_" + layout.name, [&](const std::string& p) { write_sequences(p, data, layout); });
    INFO(layout.name);
    std::string refusal = layout_refusal(layout);
    if (!refusal.empty()) refusal.replace(0, std::string("/samples").size(), "/tokens");
    check_every_engine(path, refusal, layout.name == "contiguous", data);
  }
}

/// The file offset of a contiguous dataset and the file's size (opened read-only on this rank).
std::pair<std::int64_t, std::int64_t> data_offset_and_file_size(const std::string& path, const std::string& key) {
  H5File file(STRIDER_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path));
  H5Dataset dataset(STRIDER_H5_CHECK(H5Dopen2(file.get(), key.c_str(), H5P_DEFAULT), key));
  hsize_t size = 0;
  STRIDER_H5_CHECK(H5Fget_filesize(file.get(), &size), path);
  return {static_cast<std::int64_t>(H5Dget_offset(dataset.get())), static_cast<std::int64_t>(size)};
}

/// Rows of 700,001 bytes: one row is more than twice the 256 KiB a copy thread takes at least, so
/// the direct engine reads it in pieces, one per copy thread. Written after the labels, so that the
/// samples start off a 4 KiB boundary and end the file off one.
const FixedCase kLargeRows{"u8_700001_byte_rows", ElementType::uint8, H5T_STD_U8LE, {6, 700001}};

std::string make_large_rows_file(const WrittenData& data) {
  return make_file("large_rows",
                   [&](const std::string& p) { write_fixed(p, kLargeRows, data, layouts()[0], 0, true); });
}

/// Collective: the preads the direct engine makes (with `copy_threads`, O_DIRECT or not) for a
/// batch of one large row and for every row in file order (one run), and whether the bytes and
/// labels it gave are those written.
struct PieceCount {
  std::int64_t one_row = 0, in_order = 0;
  bool right = false;
};
PieceCount direct_preads(const std::string& path, const WrittenData& data, int copy_threads, bool odirect) {
  ReaderOptions options;
  options.engine = "direct";
  options.odirect = odirect;
  options.copy_threads = copy_threads;
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
  PieceCount count;
  world().collective_try([&] {
    count.right = true;
    std::vector<std::int64_t> in_order(static_cast<std::size_t>(data.rows));
    std::iota(in_order.begin(), in_order.end(), std::int64_t{0});
    std::vector<std::int64_t> one_row{1};
    for (const std::vector<std::int64_t>* batch : {&one_row, &in_order}) {
      const auto rows = static_cast<std::int64_t>(batch->size());
      const std::vector<std::byte> expected = data.expected_bytes(*batch);
      std::vector<std::byte> samples(expected.size());
      std::vector<std::int32_t> labels(batch->size(), -1);
      const std::int64_t calls_before = reader->stats().read_calls;
      reader->read(
          batch->data(), rows,
          BatchDestination{samples.data(), static_cast<std::int64_t>(expected.size()), labels.data(), nullptr});
      (batch == &one_row ? count.one_row : count.in_order) = reader->stats().read_calls - calls_before;
      if (samples != expected) count.right = false;
      for (std::size_t k = 0; k < batch->size(); ++k)
        if (labels[k] != (*batch)[k] % data.label_modulus) count.right = false;
    }
  });
  return count;
}

// Hidden from the default run (a file system may refuse O_DIRECT): tests/integration/test_odirect.sh
// runs it where /tmp takes O_DIRECT and reports skipped elsewhere.
TEST_CASE("--odirect reads the bytes the test wrote, rows aligned or not", "[mpi][io][.odirect]") {
  const std::int64_t alignment = kDirectIoAlignmentBytes;
  // Rows of 8 KiB in a file whose data starts on a 4 KiB boundary: every row is read straight into
  // an aligned destination.
  const FixedCase aligned{"u8_8k_rows", ElementType::uint8, H5T_STD_U8LE, {24, 8192}};
  const WrittenData aligned_data = fixed_data(aligned);
  const std::string aligned_path = make_file("odirect_aligned", [&](const std::string& p) {
    write_fixed(p, aligned, aligned_data, layouts()[0], static_cast<hsize_t>(alignment));
  });
  REQUIRE_ON_ALL_RANKS(data_offset_and_file_size(aligned_path, "/samples").first % alignment == 0);
  // Rows of 100 bytes at an unaligned offset, the samples last in the file and ending off a block
  // boundary: every read is widened to whole blocks (through the bounce region), and the last
  // row's widened read passes the end of the file.
  const FixedCase unaligned{"i32_100_byte_rows", ElementType::int32, H5T_STD_I32LE, {501, 25}};
  const WrittenData unaligned_data = fixed_data(unaligned);
  const std::string unaligned_path = make_file("odirect_unaligned", [&](const std::string& p) {
    write_fixed(p, unaligned, unaligned_data, layouts()[0], 0, true);
  });
  const auto [unaligned_offset, unaligned_file_size] = data_offset_and_file_size(unaligned_path, "/samples");
  const std::int64_t unaligned_end = unaligned_offset + 501 * 100;
  REQUIRE_ON_ALL_RANKS(unaligned_offset % alignment != 0);
  REQUIRE_ON_ALL_RANKS(unaligned_end == unaligned_file_size);
  REQUIRE_ON_ALL_RANKS(unaligned_end % alignment != 0);
  // Variable-length rows (some empty).
  const WrittenData sequences = sequence_data(333);
  const std::string sequences_path =
      make_file("odirect_sequences", [&](const std::string& p) { write_sequences(p, sequences, layouts()[0]); });

  // Rows of 700,001 bytes: their reads are split over the copy threads at 4 KiB boundaries.
  const WrittenData large_data = fixed_data(kLargeRows);
  const std::string large_path = make_large_rows_file(large_data);
  REQUIRE_ON_ALL_RANKS(data_offset_and_file_size(large_path, "/samples").first % alignment != 0);

  const std::vector<std::pair<std::string, const WrittenData*>> files = {{aligned_path, &aligned_data},
                                                                         {unaligned_path, &unaligned_data},
                                                                         {sequences_path, &sequences},
                                                                         {large_path, &large_data}};
  for (const auto& [path, data] : files) {
    for (const int copy_threads : {1, 3}) {
      // Destinations on a 4 KiB boundary and 8 bytes past one (aligned rows then go through the
      // bounce region too).
      for (const std::int64_t destination_offset : {std::int64_t{0}, std::int64_t{8}}) {
        INFO(path << ", " << copy_threads << " copy threads, destination " << destination_offset
                  << " bytes past a 4 KiB boundary");
        ReaderOptions options;
        options.engine = "direct";
        options.odirect = true;
        options.copy_threads = copy_threads;
        std::string chosen;
        REQUIRE_ON_ALL_RANKS(agreed_sum(mismatches(path, options, *data, &chosen, nullptr, destination_offset)) == 0);
        REQUIRE_ON_ALL_RANKS(chosen == "direct");
      }
    }
  }
  // One large row with 3 copy threads: two pieces (a piece per 256 KiB at least); all six rows in
  // order (one run of 4.2 MB): three. One copy thread reads each run whole.
  const PieceCount split = direct_preads(large_path, large_data, 3, true);
  REQUIRE_ON_ALL_RANKS((split.right && split.one_row == 2 && split.in_order == 3));
  const PieceCount whole = direct_preads(large_path, large_data, 1, true);
  REQUIRE_ON_ALL_RANKS((whole.right && whole.one_row == 1 && whole.in_order == 1));

  // auto picks direct; the engines that read through the page cache refuse it.
  ReaderOptions automatic;
  automatic.odirect = true;
  std::string chosen;
  REQUIRE_ON_ALL_RANKS(agreed_sum(mismatches(aligned_path, automatic, aligned_data, &chosen)) == 0);
  REQUIRE_ON_ALL_RANKS(chosen == "direct");
  for (const std::string engine : {"hdf5", "mmap"}) {
    ReaderOptions refused;
    refused.engine = engine;
    refused.odirect = true;
    REQUIRE_ON_ALL_RANKS(open_refused(aligned_path, refused));
  }
}

TEST_CASE("the direct engine splits a large run over its copy threads, the bytes unchanged", "[mpi][io]") {
  const WrittenData data = fixed_data(kLargeRows);
  const std::string path = make_large_rows_file(data);
  for (const int copy_threads : {1, 2, 3}) {
    CAPTURE(copy_threads);
    const PieceCount count = direct_preads(path, data, copy_threads, false);
    REQUIRE_ON_ALL_RANKS(count.right);
    // A piece per copy thread, each at least 256 KiB: one 700,001-byte row makes two at most.
    REQUIRE_ON_ALL_RANKS(count.one_row == std::min(copy_threads, 2));
    REQUIRE_ON_ALL_RANKS(count.in_order == copy_threads);
  }
  // And every test batch (duplicates, rows reversed, every third) is read right in pieces.
  ReaderOptions options;
  options.engine = "direct";
  options.copy_threads = 3;
  std::string chosen;
  REQUIRE_ON_ALL_RANKS(agreed_sum(mismatches(path, options, data, &chosen)) == 0);
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
  REQUIRE_ON_ALL_RANKS(open_refused(path, ReaderOptions{}));
  for (const std::string engine : {"hdf5", "direct", "mmap"}) {
    INFO("engine " << engine);
    std::unique_ptr<BatchReader> reader = open_with_labels_per_batch(path, engine);
    std::vector<std::byte> samples(4 * sizeof(float) * 3);
    std::vector<std::int32_t> labels(3, -1);
    const BatchDestination destination{samples.data(), static_cast<std::int64_t>(samples.size()), labels.data(),
                                       nullptr};
    const std::vector<std::int64_t> good = {49, 4, 6};
    const std::vector<std::int64_t> bad = {7, 5, 2};
    // Local reads, agreed before the reader's collective close.
    std::vector<std::int32_t> good_labels;
    world().collective_try([&] {
      reader->read(good.data(), 3, destination);
      good_labels = labels;
    });
    const std::string refusal = failure_of_read(*reader, bad, destination, "(a label beyond int32 was read)");
    REQUIRE_ON_ALL_RANKS(good_labels == std::vector<std::int32_t>{49 % 3, 4 % 3, 6 % 3});
    REQUIRE_ON_ALL_RANKS(refusal.find("/labels[5]") != std::string::npos);
    REQUIRE_ON_ALL_RANKS(refusal.find("does not fit int32") != std::string::npos);
  }
}

TEST_CASE("labels read per batch give the same ranges and the same dataset fingerprint as held ones", "[mpi][io]") {
  const FixedCase test{"fingerprint", ElementType::float32, H5T_IEEE_F32LE, {300, 2}};
  const std::string path =
      make_file("fingerprint", [&](const std::string& p) { write_fixed_any(p, test, layouts()[0]); });
  const DatasetKeys keys;
  std::unique_ptr<BatchReader> held = open_reader(world(), path, ReaderOptions{});
  REQUIRE_ON_ALL_RANKS(!held->info().labels_per_batch);
  const std::uint64_t expected = dataset_fingerprint(held->info(), held->labels(), held->lengths(), keys);
  for (const std::string engine : {"hdf5", "direct", "mmap"}) {
    INFO("engine " << engine);
    std::unique_ptr<BatchReader> reader = open_with_labels_per_batch(path, engine);
    std::vector<std::int32_t> range(100, -1);
    std::int32_t max_label = -1;
    bool range_refused = false;
    // Local reads, agreed before the reader's collective close.
    const std::uint64_t streamed = world().collective_try([&] {
      reader->read_labels(150, 100, range.data());
      try {
        reader->read_labels(250, 51, range.data());
      } catch (const UsageError&) {
        range_refused = true;
      }
      return dataset_fingerprint(
          reader->info(), reader->info().num_samples,
          [&](std::int64_t first, std::int64_t count, std::int32_t* out) { reader->read_labels(first, count, out); },
          reader->lengths(), keys, &max_label);
    });
    std::int64_t wrong_labels = 0;
    for (std::int64_t k = 0; k < 100; ++k) wrong_labels += range[k] == (150 + k) % 7 ? 0 : 1;  // labels are i % 7
    REQUIRE_ON_ALL_RANKS(wrong_labels == 0);
    REQUIRE_ON_ALL_RANKS(range_refused);  // rows 250..300 do not exist
    REQUIRE_ON_ALL_RANKS(streamed == expected);
    REQUIRE_ON_ALL_RANKS(max_label == 6);
  }
}

TEST_CASE("open_reader reports what it found and reads only this rank's rows", "[mpi][io]") {
  const FixedCase test{"info_f32", ElementType::float32, H5T_IEEE_F32LE, {64, 4, 2}};
  const std::string path = make_file("info", [&](const std::string& p) {
    write_fixed_any(p, test, Layout{"chunked", 8, true});
  });
  std::unique_ptr<BatchReader> reader = open_reader(world(), path, ReaderOptions{});
  const DatasetInfo& info = reader->info();
  REQUIRE_ON_ALL_RANKS(reader->engine() == "hdf5");
  REQUIRE_ON_ALL_RANKS(info.path == path);  // messages about the dataset name it
  REQUIRE_ON_ALL_RANKS(info.num_samples == 64);
  REQUIRE_ON_ALL_RANKS(info.element_type == ElementType::float32);
  REQUIRE_ON_ALL_RANKS(info.sample_shape == std::vector<std::int64_t>{4, 2});
  REQUIRE_ON_ALL_RANKS(info.sample_bytes == 32);
  REQUIRE_ON_ALL_RANKS(info.layout == "chunked");
  REQUIRE_ON_ALL_RANKS(info.chunk_shape == std::vector<std::int64_t>{8, 4, 2});
  REQUIRE_ON_ALL_RANKS(info.compressed);
  REQUIRE_ON_ALL_RANKS(info.has_labels);
  REQUIRE_ON_ALL_RANKS(reader->labels().size() == 64);
  // Rows 0..7 share a chunk: one H5Dread, one chunk read.
  const std::vector<std::int64_t> batch = {7, 0, 3, 3};
  std::vector<float> out(4 * 8);
  // Local reads, agreed before the reader's collective close.
  const std::int64_t wrong = world().collective_try([&] {
    reader->read(batch.data(), 4, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 128, nullptr, nullptr});
    const ReadStats stats = reader->stats();
    std::int64_t found =
        stats.read_calls == 1 && stats.useful_bytes == 128 && stats.bytes_read > 0 && stats.bytes_read < 128 * 8 ? 0
                                                                                                                 : 1;
    if (std::memcmp(out.data(), fixed_data(test).expected_bytes(batch).data(), 128) != 0) ++found;
    // Errors in read() are local and name the problem.
    try {
      const std::int64_t bad = 64;
      reader->read(&bad, 1, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 128, nullptr, nullptr});
      ++found;
    } catch (const UsageError& error) {
      if (std::string(error.what()).find("outside [0, 64)") == std::string::npos) ++found;
    }
    // The first index outside is named, with its position: a negative one, and the first of two.
    for (const auto& [bad, message] :
         {std::pair<std::vector<std::int64_t>, std::string>{{7, 3, -1, 5}, "index -1 at batch position 2"},
          {{7, 64, -1, 5}, "index 64 at batch position 1"}}) {
      try {
        reader->read(bad.data(), 4, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 128, nullptr, nullptr});
        ++found;
      } catch (const UsageError& error) {
        if (std::string(error.what()).find(message + " is outside [0, 64)") == std::string::npos) ++found;
      } catch (...) {
        ++found;
      }
    }
    try {
      reader->read(batch.data(), 4, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 100, nullptr, nullptr});
      ++found;
    } catch (const UsageError&) {
    }
    return found;
  });
  REQUIRE_ON_ALL_RANKS(wrong == 0);
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
  const std::string good = make_file("good", [](const std::string& p) {
    write_fixed_any(p, FixedCase{"", ElementType::float32, H5T_IEEE_F32LE, {10, 2}}, Layout{"contiguous"});
  });
  // Missing on one rank only (rank 1 runs in a folder without it): nobody hangs.
  {
    char here[4096];
    REQUIRE_ON_ALL_RANKS(getcwd(here, sizeof here) != nullptr);
    const std::string elsewhere = folder + "/elsewhere" + std::to_string(world().rank());
    REQUIRE_ON_ALL_RANKS(mkdir(elsewhere.c_str(), 0700) == 0);
    REQUIRE_ON_ALL_RANKS(chdir(world().rank() == 1 ? elsewhere.c_str() : folder.c_str()) == 0);
    require_failure("good.h5", world().size() > 1 ? "cannot open good.h5: No such file" : "(no error)");
    REQUIRE_ON_ALL_RANKS(chdir(here) == 0);
  }
  // Ranks given different files: refused, not guessed.
  require_failure(world().rank() == 1 ? folder + "/elsewhere.h5" : good,
                  world().size() > 1 ? "this rank was given the data '" + folder + "/elsewhere.h5' but rank 0 '" + good
                                     : "(no error)");
  require_failure(good, "no dataset /nope", ReaderOptions{{"/nope"}});
  require_failure(good, "unknown engine", ReaderOptions{{}, "fast"});
  {
    ReaderOptions options;
    options.keys.labels = "/missing_labels";
    options.require_labels = true;
    require_failure(good, "no labels dataset /missing_labels", options);
  }
  {
    // A labels name other than the default must exist: a misspelt one is an error, not data without
    // labels; `none` reads none, which a class-aware mode refuses.
    ReaderOptions options;
    options.keys.labels = "/lables";
    require_failure(good, "no labels dataset /lables (named by --label-key; --label-key none reads no labels)",
                    options);
    options.keys.labels = std::string(kNoLabelsKey);
    options.require_labels = true;
    require_failure(good, "--label-key none reads no labels, but a class-aware sampler needs them", options);
    options.require_labels = false;
    const std::unique_ptr<BatchReader> reader = open_reader(world(), good, options);
    REQUIRE_ON_ALL_RANKS(!reader->info().has_labels);  // the file's /labels is not read
    REQUIRE_ON_ALL_RANKS(reader->labels().size() == 0);
  }
  {
    // Sequences named beside a /samples the file also has: the named layout is read, not /samples.
    const std::string both = make_file("both_layouts", [](const std::string& p) {
      H5File file = create_file(p);
      const std::vector<float> samples(20, 1.0f);
      const std::vector<std::int32_t> tokens(30, 7);
      std::vector<std::int64_t> offsets(11);
      for (std::size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<std::int64_t>(i * 3);
      write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {10, 2}, samples.data(),
                    Layout{"contiguous"});
      write_dataset(file.get(), "/toks", H5T_STD_I32LE, H5T_NATIVE_INT32, {30}, tokens.data(), Layout{"contiguous"});
      write_dataset(file.get(), "/offs", H5T_STD_I64LE, H5T_NATIVE_INT64, {11}, offsets.data(), Layout{"contiguous"});
    });
    ReaderOptions options;
    options.keys.tokens = "/toks";
    options.keys.offsets = "/offs";
    const std::unique_ptr<BatchReader> reader = open_reader(world(), both, options);
    REQUIRE_ON_ALL_RANKS(reader->info().variable_length);
    REQUIRE_ON_ALL_RANKS(reader->info().num_tokens == 30);
    options.keys.data = "/samples2";
    require_failure(both, "--data-key /samples2 names fixed-size samples and --tokens-key/--offsets-key", options);
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
  // Other 2-byte floats are refused by name: bfloat16 (float32's top half), and any other layout.
  const auto two_byte_float = [](std::size_t exponent_bits, std::size_t mantissa_bits, std::size_t bias) {
    return [=](const std::string& p) {
      H5File file = create_file(p);
      H5Datatype type(STRIDER_H5_CHECK(H5Tcopy(H5T_IEEE_F32LE), "copy"));
      STRIDER_H5_CHECK(H5Tset_fields(type.get(), 15, mantissa_bits, exponent_bits, 0, mantissa_bits), "fields");
      STRIDER_H5_CHECK(H5Tset_size(type.get(), 2), "size");
      STRIDER_H5_CHECK(H5Tset_ebias(type.get(), bias), "bias");
      const std::vector<float> samples(20, 1.0f);
      write_dataset(file.get(), "/samples", type.get(), H5T_NATIVE_FLOAT, {10, 2}, samples.data(),
                    Layout{"contiguous"});
    };
  };
  require_failure(make_file("bfloat16", two_byte_float(8, 7, 127)), "/samples holds bfloat16");
  require_failure(make_file("float_6_9", two_byte_float(6, 9, 31)),
                  "/samples holds a 2-byte float that is not IEEE binary16 (sign bit 15, 6 exponent bits at 9");
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

TEST_CASE("strider-gen records: uint8 [N, record_bytes], rows on 4 KiB boundaries when aligned", "[mpi][io][gen]") {
  SyntheticOptions options;
  options.kind = "records";
  options.samples = 10;
  options.record_bytes = 3 * kDirectIoAlignmentBytes;
  options.progress = false;
  for (const std::int64_t alignment : {std::int64_t{0}, kDirectIoAlignmentBytes}) {
    INFO("alignment " << alignment);
    options.alignment_bytes = alignment;
    const std::string path = test_folder() + "/records_" + std::to_string(alignment) + ".h5";
    write_synthetic_dataset(world(), path, options);
    const auto [offset, file_size] = data_offset_and_file_size(path, "/samples");
    // HDF5 alone puts the data after its metadata, off any 4 KiB boundary; aligned, every row starts
    // on one (a row is 3 blocks).
    REQUIRE_ON_ALL_RANKS((offset % kDirectIoAlignmentBytes == 0) == (alignment > 0));
    REQUIRE_ON_ALL_RANKS(offset + 10 * 3 * kDirectIoAlignmentBytes <= file_size);
    std::unique_ptr<BatchReader> reader = open_reader(world(), path, ReaderOptions{});
    const DatasetInfo info = reader->info();
    REQUIRE_ON_ALL_RANKS(info.element_type == ElementType::uint8);
    REQUIRE_ON_ALL_RANKS(info.sample_shape == std::vector<std::int64_t>{3 * kDirectIoAlignmentBytes});
    REQUIRE_ON_ALL_RANKS(info.num_samples == 10);
    // Opaque bytes: rows differ, and a row is not constant.
    const std::vector<std::int64_t> rows = {0, 1};
    std::vector<std::byte> bytes(static_cast<std::size_t>(2 * info.sample_bytes));
    reader->read(rows.data(), 2, BatchDestination{bytes.data(), 2 * info.sample_bytes});
    const auto half = bytes.begin() + info.sample_bytes;
    REQUIRE_ON_ALL_RANKS(!std::equal(bytes.begin(), half, half));
    REQUIRE_ON_ALL_RANKS(std::count(bytes.begin(), half, bytes.front()) < info.sample_bytes / 8);
  }
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

TEST_CASE("external storage: hdf5 reads it, direct and mmap refuse it with a clear line", "[mpi][io]") {
  const FixedCase test{"external", ElementType::float32, H5T_IEEE_F32LE, {40, 6}};
  const std::string external = test_folder() + "/external_samples.bin";
  const WrittenData data = fixed_data(test);
  const std::string path = make_file("external", [&](const std::string& p) {
    H5File file = create_file(p);
    H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(2, test.dims.data(), nullptr), p));
    H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), p));
    STRIDER_H5_CHECK(H5Pset_external(create.get(), external.c_str(), 0, 40 * 6 * sizeof(float)), p);
    H5Dataset dataset(STRIDER_H5_CHECK(
        H5Dcreate2(file.get(), "/samples", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), p));
    STRIDER_H5_CHECK(H5Dwrite(dataset.get(), data.memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.values.data()), p);
    std::vector<std::int64_t> labels(40);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 7);
    write_dataset(file.get(), "/labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {40}, labels.data(), Layout{"contiguous"});
  });
  check_every_engine(path, "/samples is stored in external files (use --engine hdf5 or auto)", true, data);
}

namespace {

/// What each rank must read of a file of `rows` rows of `row_bytes` for its own batches of `plan`
/// (this rank's sampler): the rows of its batches, a row read once per batch (`unique`) or once per
/// position, and the distinct chunks of `chunk_rows` rows its batches touch, summed over batches.
struct OwnRows {
  std::int64_t positions = 0, unique_rows = 0, chunks = 0;
};

OwnRows own_rows(const Sampler& plan, std::int64_t chunk_rows) {
  OwnRows own;
  std::vector<std::int64_t> batch;
  for (std::int64_t step = 0; step < plan.num_steps(); ++step) {
    plan.batch(step, batch);
    own.positions += static_cast<std::int64_t>(batch.size());
    std::set<std::int64_t> rows(batch.begin(), batch.end()), chunks;
    own.unique_rows += static_cast<std::int64_t>(rows.size());
    for (std::int64_t row : rows) chunks.insert(row / chunk_rows);
    own.chunks += static_cast<std::int64_t>(chunks.size());
  }
  return own;
}

/// Bytes this process has read with read()/pread() (/proc/self/io rchar), including this look at
/// /proc/self/io itself (the kernel counts it once it has answered), or -1.
std::int64_t process_bytes_read() {
  std::ifstream io("/proc/self/io");
  const std::string text((std::istreambuf_iterator<char>(io)), std::istreambuf_iterator<char>());
  std::istringstream fields(text);
  std::string key;
  std::int64_t value = -1;
  while (fields >> key >> value)
    if (key == "rchar:") return value + static_cast<std::int64_t>(text.size());
  return -1;
}

/// The smallest and largest stored size of the chunks of /samples in `path` (H5Dget_chunk_storage_size).
std::pair<std::int64_t, std::int64_t> chunk_storage_range(const std::string& path, hsize_t rows, hsize_t chunk_rows,
                                                          hsize_t columns) {
  H5File file(STRIDER_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path));
  H5Dataset dataset(STRIDER_H5_CHECK(H5Dopen2(file.get(), "/samples", H5P_DEFAULT), path));
  std::int64_t low = -1, high = 0;
  for (hsize_t first = 0; first < rows; first += chunk_rows) {
    const hsize_t offset[2] = {first, 0 * columns};
    hsize_t bytes = 0;
    STRIDER_H5_CHECK(H5Dget_chunk_storage_size(dataset.get(), offset, &bytes), path);
    low = low < 0 ? static_cast<std::int64_t>(bytes) : std::min(low, static_cast<std::int64_t>(bytes));
    high = std::max(high, static_cast<std::int64_t>(bytes));
  }
  return {low, high};
}

}  // namespace

TEST_CASE("each rank reads only its own rows: bytes read against its plan", "[mpi][io][own_rows]") {
  // 1000 rows of 16 float32 (64 bytes); this rank's batches of 32 from the shuffled distributed plan.
  const std::int64_t rows = 1000, row_bytes = 64, chunk_rows = 25;
  const FixedCase test{"own_rows", ElementType::float32, H5T_IEEE_F32LE, {1000, 16}};
  DistributedSamplerConfig config;
  config.dataset_size = rows;
  config.batch_size = 32;
  config.seed = 11;
  DistributedSampler plan(config, world().size(), world().rank());
  plan.set_epoch(1);
  const OwnRows own = own_rows(plan, chunk_rows);
  std::int64_t wrong = 0;
  std::ostringstream report;
  const auto read_plan = [&](const std::string& path, const std::string& engine) {
    ReaderOptions options;
    options.engine = engine;
    std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
    std::vector<std::byte> samples(32 * static_cast<std::size_t>(row_bytes));
    std::vector<std::int64_t> batch;
    std::int64_t syscalls = -1;
    world().collective_try([&] {  // local reads, agreed before the reader's collective close
      const std::int64_t before = process_bytes_read();
      for (std::int64_t step = 0; step < plan.num_steps(); ++step) {
        plan.batch(step, batch);
        reader->read(batch.data(), static_cast<std::int64_t>(batch.size()),
                     BatchDestination{samples.data(), static_cast<std::int64_t>(samples.size()), nullptr, nullptr});
      }
      // The second look's own bytes are not in its answer yet.
      std::ifstream io("/proc/self/io");
      for (std::string key; io >> key;)
        if (key == "rchar:" && io >> syscalls) syscalls -= before;
    });
    return std::make_pair(reader->stats(), syscalls);
  };
  const auto expect = [&](const std::string& what, std::int64_t got, std::int64_t low, std::int64_t high) {
    if (got < low || got > high) {
      ++wrong;
      report << what << ": " << got << " bytes, expected " << low << ".." << high << "; ";
    }
  };

  const std::string contiguous =
      make_file("own_rows_contiguous", [&](const std::string& p) { write_fixed_any(p, test, Layout{"contiguous"}); });
  // direct: one pread per run of adjacent rows, a row once per batch; the kernel counts the same.
  const auto [direct, direct_syscalls] = read_plan(contiguous, "direct");
  expect("direct, counted", direct.bytes_read, own.unique_rows * row_bytes, own.unique_rows * row_bytes);
  expect("direct, read() by this process", direct_syscalls, own.unique_rows * row_bytes, own.unique_rows * row_bytes);
  // mmap: every position is copied from the mapping.
  const auto mmap = read_plan(contiguous, "mmap").first;
  expect("mmap, counted", mmap.bytes_read, own.positions * row_bytes, own.positions * row_bytes);
  // hdf5, contiguous and chunked without a filter: exactly the selected rows.
  expect("hdf5 contiguous, counted", read_plan(contiguous, "hdf5").first.bytes_read, own.unique_rows * row_bytes,
         own.unique_rows * row_bytes);
  const std::string chunked = make_file("own_rows_chunked", [&](const std::string& p) {
    write_fixed_any(p, test, Layout{"chunked", static_cast<hsize_t>(chunk_rows)});
  });
  expect("hdf5 chunked, counted", read_plan(chunked, "hdf5").first.bytes_read, own.unique_rows * row_bytes,
         own.unique_rows * row_bytes);
  // hdf5, chunked and compressed: each chunk a batch touches is read once per batch, so the bytes lie
  // between the batches' distinct chunks times the smallest and the largest stored chunk.
  const std::string deflate = make_file("own_rows_deflate", [&](const std::string& p) {
    write_fixed_any(p, test, Layout{"deflate", static_cast<hsize_t>(chunk_rows), true});
  });
  const auto [smallest, largest] = chunk_storage_range(deflate, rows, chunk_rows, 16);
  expect("hdf5 deflate, counted", read_plan(deflate, "hdf5").first.bytes_read, own.chunks * smallest,
         own.chunks * largest);
  INFO(report.str());
  REQUIRE(agreed_sum(wrong) == 0);
}

TEST_CASE("the hdf5 engine refuses a read from a second thread; direct does not use HDF5", "[mpi][io][threads]") {
  const FixedCase test{"threads", ElementType::float32, H5T_IEEE_F32LE, {50, 4}};
  const std::string path = make_file("threads", [&](const std::string& p) {
    write_fixed_any(p, test, Layout{"chunked", 10});
  });
  const std::int64_t rows[] = {3, 1, 4};
  std::vector<float> out(12);
  const BatchDestination destination{reinterpret_cast<std::byte*>(out.data()), 48, nullptr, nullptr};
  std::int64_t wrong = 0;
  std::string message;
  {
    std::unique_ptr<BatchReader> reader = open_reader(world(), path, ReaderOptions{{}, "hdf5"});
    // The first read claims the reader for its thread (here a stand-in for the prefetcher's I/O thread).
    std::thread io_thread([&] {
      try {
        reader->read(rows, 3, destination);
        reader->read(rows, 3, destination);
      } catch (...) {
        ++wrong;
      }
    });
    io_thread.join();
    try {
      reader->read(rows, 3, destination);
      ++wrong;
    } catch (const UsageError& error) {
      message = error.what();
      if (message.find("the hdf5 engine reading " + path + " was called from a second thread") == std::string::npos)
        ++wrong;
    }
  }
  // direct never calls HDF5 after open: any thread may read (one at a time).
  const std::string plain =
      make_file("threads_plain", [&](const std::string& p) { write_fixed_any(p, test, Layout{"contiguous"}); });
  std::unique_ptr<BatchReader> direct = open_reader(world(), plain, ReaderOptions{{}, "direct"});
  std::thread other([&] {
    try {
      direct->read(rows, 3, destination);
    } catch (...) {
      ++wrong;
    }
  });
  other.join();
  try {
    direct->read(rows, 3, destination);
  } catch (...) {
    ++wrong;
  }
  INFO(message);
  REQUIRE(agreed_sum(wrong) == 0);
}

TEST_CASE("no HDF5 object is left open once the readers are closed", "[mpi][io][hdf5_objects]") {
  const FixedCase test{"objects", ElementType::float32, H5T_IEEE_F32LE, {60, 3}};
  std::int64_t wrong = 0;
  // Counted over every file this process has open (H5F_OBJ_ALL as the file: all files), against what
  // was open before (a Loader unwound by an error keeps its file open rather than close it alone).
  const ssize_t open_before = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  for (const Layout& layout : {Layout{"contiguous"}, Layout{"chunked", 8}}) {
    const std::string path =
        make_file("objects_" + layout.name, [&](const std::string& p) { write_fixed_any(p, test, layout); });
    for (const std::string engine : {"hdf5", "direct", "mmap", "auto"}) {
      if (layout.name != "contiguous" && engine != "hdf5") continue;
      for (const bool labels_in_memory : {true, false}) {
        ReaderOptions options;
        options.engine = engine;
        options.labels_in_memory = labels_in_memory;
        std::unique_ptr<BatchReader> reader = open_reader(world(), path, options);
        const std::int64_t rows[] = {59, 0, 7};
        std::vector<float> out(9);
        std::vector<std::int32_t> labels(3);
        world().collective_try([&] {
          reader->read(rows, 3, BatchDestination{reinterpret_cast<std::byte*>(out.data()), 36, labels.data(), nullptr});
        });
        reader.reset();  // collective for the hdf5 engine: every rank closes
        const ssize_t open_objects = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) - open_before;
        if (open_objects != 0) {
          ++wrong;
          UNSCOPED_INFO(layout.name << " " << engine << " labels_in_memory " << labels_in_memory << ": " << open_objects
                                    << " HDF5 objects open after close");
        }
      }
    }
  }
  REQUIRE(agreed_sum(wrong) == 0);
}

TEST_CASE("strider-gen --dtype float16 stores each feature rounded to the nearest half", "[mpi][io][gen]") {
  SyntheticOptions options;
  options.samples = 200;
  options.classes = 3;
  options.dim = 12;
  options.seed = 9;
  const std::string single = test_folder() + "/gen_float32.h5";
  write_synthetic_dataset(world(), single, options);
  options.dtype = "float16";
  const std::string half = test_folder() + "/gen_float16.h5";
  write_synthetic_dataset(world(), half, options);
  std::unique_ptr<BatchReader> singles = open_reader(world(), single, ReaderOptions{});
  std::unique_ptr<BatchReader> halves = open_reader(world(), half, ReaderOptions{});
  REQUIRE_ON_ALL_RANKS(halves->info().element_type == ElementType::float16);
  REQUIRE_ON_ALL_RANKS(halves->info().sample_bytes == options.dim * 2);
  std::vector<std::int64_t> all(static_cast<std::size_t>(options.samples));
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> x(all.size() * static_cast<std::size_t>(options.dim));
  std::vector<std::uint16_t> h(x.size());
  std::vector<std::int32_t> labels_single(all.size()), labels_half(all.size());
  singles->read(all.data(), options.samples,
                BatchDestination{reinterpret_cast<std::byte*>(x.data()), static_cast<std::int64_t>(x.size() * 4),
                                 labels_single.data(), nullptr});
  halves->read(all.data(), options.samples,
               BatchDestination{reinterpret_cast<std::byte*>(h.data()), static_cast<std::int64_t>(h.size() * 2),
                                labels_half.data(), nullptr});
  // The half's value, decoded here from its fields, is within half a float16 ulp of the float.
  std::int64_t wrong = labels_single == labels_half ? 0 : 1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int exponent = (h[i] >> 10) & 0x1f;
    const int mantissa = h[i] & 0x3ff;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);  // no inf/NaN here
    const double value = (h[i] & 0x8000) ? -magnitude : magnitude;
    const double ulp = std::ldexp(1.0, std::max(exponent, 1) - 25);
    if (exponent == 0x1f || std::abs(value - static_cast<double>(x[i])) > ulp / 2) ++wrong;
  }
  REQUIRE_ON_ALL_RANKS(wrong == 0);
}

namespace {

/// Rows [first, first + count) of `data` (fixed-size or sequences) into its own file, with the
/// global labels (row % label_modulus) and, for sequences, offsets that start at `offset_base`
/// (tokens before it are filler that no row uses).
void write_shard(const std::string& path, const WrittenData& data, hid_t file_type, const std::vector<hsize_t>& dims,
                 std::int64_t first, std::int64_t count, const Layout& layout, std::int64_t offset_base = 0) {
  H5File file = create_file(path);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) labels[i] = (first + i) % data.label_modulus;
  if (data.variable_length()) {
    const std::int64_t begin = data.offsets[first], end = data.offsets[first + count];
    std::vector<std::byte> tokens(static_cast<std::size_t>((offset_base + end - begin) * 4), std::byte{0x5a});
    std::memcpy(tokens.data() + offset_base * 4, data.values.data() + begin * 4,
                static_cast<std::size_t>(end - begin) * 4);
    std::vector<std::int64_t> offsets;
    for (std::int64_t i = 0; i <= count; ++i) offsets.push_back(offset_base + data.offsets[first + i] - begin);
    write_dataset(file.get(), "/tokens", file_type, data.memory_type, {tokens.size() / 4}, tokens.data(), layout);
    write_dataset(file.get(), "/offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, {offsets.size()}, offsets.data(), layout);
  } else {
    std::vector<hsize_t> shape = dims;
    shape[0] = static_cast<hsize_t>(count);
    const std::size_t row_bytes = static_cast<std::size_t>(data.row_elements) * data.element_size;
    write_dataset(file.get(), "/samples", file_type, data.memory_type, shape,
                  data.values.data() + static_cast<std::size_t>(first) * row_bytes, layout);
  }
  write_dataset(file.get(), "/labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {labels.size()}, labels.data(), layout);
}

/// Rank 0 writes `data` split at `splits` (the first row of every shard but the first) into
/// shards named prefix-0.h5, prefix-1.h5, ..., shard k with layout `layouts[k % size]`.
std::vector<std::string> make_shards(const std::string& prefix, const WrittenData& data, hid_t file_type,
                                     const std::vector<hsize_t>& dims, const std::vector<std::int64_t>& splits,
                                     const std::vector<Layout>& shard_layouts) {
  std::vector<std::int64_t> bounds = {0};
  bounds.insert(bounds.end(), splits.begin(), splits.end());
  bounds.push_back(data.rows);
  std::vector<std::string> paths;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    paths.push_back(make_file(prefix + "-" + std::to_string(k), [&](const std::string& path) {
      write_shard(path, data, file_type, dims, bounds[k], bounds[k + 1] - bounds[k],
                  shard_layouts[k % shard_layouts.size()], static_cast<std::int64_t>(k % 3));
    }));
  }
  return paths;
}

std::string comma_list(const std::vector<std::string>& paths) {
  std::string list;
  for (const std::string& path : paths) list += (list.empty() ? "" : ",") + path;
  return list;
}

}  // namespace

TEST_CASE("a dataset split over shards reads as the concatenation, with every engine", "[mpi][io][shards]") {
  const FixedCase test{"shards_f32", ElementType::float32, H5T_IEEE_F32LE, {301, 5}};
  const WrittenData data = fixed_data(test);
  // Uneven shards, one of a single row; contiguous ones first (direct and mmap read them all).
  const std::vector<std::int64_t> splits = {100, 101, 250};
  const std::vector<std::string> contiguous =
      make_shards("shard_contiguous", data, test.file_type, test.dims, splits, {layouts()[0]});
  check_every_engine(comma_list(contiguous), "", false, data);
  // Mixed layouts: the hdf5 engine reads them, the raw engines refuse naming the shard.
  const std::vector<std::string> mixed = make_shards("shard_mixed", data, test.file_type, test.dims, splits, layouts());
  check_every_engine(comma_list(mixed), "/samples is chunked in " + mixed[1] + " (use --engine hdf5 or auto)", false,
                     data);
  // Every shard's chunks inflated by the hdf5 engine, the same chunk index in several shards.
  const std::vector<std::string> inflated =
      make_shards("shard_inflated", data, test.file_type, test.dims, splits, {layouts()[2], layouts()[4]});
  check_every_engine(comma_list(inflated), "/samples is chunked and compressed (use --engine hdf5 or auto)", false,
                     data);
  {
    // A part of chunk 0 of shards 0, 2 and 3 in one batch: each inflated from its own file.
    std::unique_ptr<BatchReader> reader = open_reader(world(), comma_list(inflated), ReaderOptions{{}, "hdf5"});
    const std::vector<std::int64_t> rows = {5, 105, 260};
    const std::vector<std::byte> expected = data.expected_bytes(rows);
    std::vector<std::byte> got(expected.size());
    world().collective_try([&] {
      reader->read(rows.data(), 3,
                   BatchDestination{got.data(), static_cast<std::int64_t>(got.size()), nullptr, nullptr});
    });
    REQUIRE_ON_ALL_RANKS(got == expected);
  }
  // The row ranges, and the order a glob gives (byte-wise: the same as the list here).
  std::unique_ptr<BatchReader> reader = open_reader(world(), test_folder() + "/shard_mixed-*.h5", ReaderOptions{});
  const std::vector<std::int64_t> firsts = {0, 100, 101, 250}, counts = {100, 1, 149, 51};
  REQUIRE_ON_ALL_RANKS(reader->info().shards.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    REQUIRE_ON_ALL_RANKS(reader->info().shards[k].path == mixed[k]);
    REQUIRE_ON_ALL_RANKS(reader->info().shards[k].first_row == firsts[k]);
    REQUIRE_ON_ALL_RANKS(reader->info().shards[k].rows == counts[k]);
  }
  REQUIRE_ON_ALL_RANKS(reader->info().num_samples == 301);
  REQUIRE_ON_ALL_RANKS(reader->info().layout == "mixed");
  REQUIRE_ON_ALL_RANKS(reader->info().path == test_folder() + "/shard_mixed-*.h5");  // what --data named
}

TEST_CASE("sequences split over shards: offsets that start above 0 in a file, a shard of one empty row",
          "[mpi][io][shards]") {
  const WrittenData data = sequence_data(333);  // lengths (i * 7 + 3) % 13: rows 7, 20, 33, ... are empty
  const std::vector<std::string> contiguous =
      make_shards("seq_contiguous", data, H5T_STD_I32LE, {}, {7, 8, 200}, {layouts()[0]});
  // Each shard's offsets start at its index % 3: direct and mmap still read (from the file's offset).
  check_every_engine(comma_list(contiguous), "", false, data);
  const std::vector<std::string> mixed = make_shards("seq_mixed", data, H5T_STD_I32LE, {}, {7, 8, 200}, layouts());
  check_every_engine(comma_list(mixed), "/tokens is chunked in " + mixed[1] + " (use --engine hdf5 or auto)", false,
                     data);
}

namespace {

/// The open descriptors of this process that name a file whose path starts with `prefix`.
std::int64_t open_files_under(const std::string& prefix) {
  std::int64_t count = 0;
  for (int descriptor = 0; descriptor < 1024; ++descriptor) {
    char target[4096];
    const ssize_t length = readlink(("/proc/self/fd/" + std::to_string(descriptor)).c_str(), target, sizeof target - 1);
    if (length > 0 && std::string(target, static_cast<std::size_t>(length)).rfind(prefix, 0) == 0) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("a reader keeps at most max_open_files shards open, and reads them all right", "[mpi][io][shards]") {
  const FixedCase test{"bound", ElementType::int32, H5T_STD_I32LE, {120, 3}};
  const WrittenData data = fixed_data(test);
  const std::vector<std::string> paths =
      make_shards("bound", data, test.file_type, test.dims, {20, 40, 60, 80, 100}, {layouts()[0]});
  for (const std::string engine : {"hdf5", "direct", "mmap"}) {
    INFO("engine " << engine);
    ReaderOptions options;
    options.engine = engine;
    options.max_open_files = 2;
    std::unique_ptr<BatchReader> reader = open_reader(world(), comma_list(paths), options);
    std::int64_t most_open = 0, wrong = 0;
    for (const auto& batch : test_batches(data.rows)) {
      const std::vector<std::byte> expected = data.expected_bytes(batch);
      std::vector<std::byte> samples(expected.size() + 1);
      reader->read(batch.data(), static_cast<std::int64_t>(batch.size()),
                   BatchDestination{samples.data(), static_cast<std::int64_t>(expected.size()), nullptr, nullptr});
      if (!expected.empty() && std::memcmp(expected.data(), samples.data(), expected.size()) != 0) ++wrong;
      most_open = std::max(most_open, open_files_under(test_folder() + "/bound-"));
    }
    REQUIRE_ON_ALL_RANKS(wrong == 0);
    // mmap holds mappings, not descriptors.
    REQUIRE_ON_ALL_RANKS(most_open <= (engine == std::string("mmap") ? 0 : 2));
    REQUIRE_ON_ALL_RANKS(most_open >= (engine == std::string("mmap") ? 0 : 1));
  }
}

TEST_CASE("shards that cannot be read together fail on every rank with one line naming the shard",
          "[mpi][io][shards][errors]") {
  const FixedCase floats{"", ElementType::float32, H5T_IEEE_F32LE, {30, 4}};
  const WrittenData data = fixed_data(floats);
  const std::vector<std::string> good = make_shards("agree", data, floats.file_type, floats.dims, {10}, {layouts()[0]});
  const std::string doubles = make_file("disagree_type", [&](const std::string& p) {
    write_fixed_any(p, FixedCase{"", ElementType::float64, H5T_IEEE_F64LE, {7, 4}}, layouts()[0]);
  });
  require_failure(good[0] + "," + doubles,
                  "shard " + doubles + " (2 of 2) has float64 samples of shape [4] in /samples with labels, but " +
                      good[0] + " has float32 samples of shape [4] in /samples with labels (all shards need the same");
  const std::string wider = make_file("disagree_shape", [&](const std::string& p) {
    write_fixed_any(p, FixedCase{"", ElementType::float32, H5T_IEEE_F32LE, {7, 2, 2}}, layouts()[0]);
  });
  require_failure(comma_list(good) + "," + wider, "shard " + wider + " (3 of 3) has float32 samples of shape [2, 2]");
  const std::string unlabelled = make_file("disagree_labels", [&](const std::string& p) {
    H5File file = create_file(p);
    const std::vector<float> samples(12, 1.0f);
    write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {3, 4}, samples.data(), layouts()[0]);
  });
  require_failure(unlabelled + "," + good[1], "in /samples with labels, but " + unlabelled +
                                                  " has float32 samples of shape [4] in /samples without labels");
  const std::string empty = make_file("empty_shard", [&](const std::string& p) {
    write_fixed_any(p, FixedCase{"", ElementType::float32, H5T_IEEE_F32LE, {0, 4}}, layouts()[0]);
  });
  require_failure(good[0] + "," + empty, "cannot open " + empty + ": /samples is empty (shape [0, 4])");
  require_failure(test_folder() + "/agree-*.nc", "--data: no file matches '" + test_folder() + "/agree-*.nc'");
  require_failure(good[0] + "," + test_folder() + "/./agree-0.h5",
                  "shard " + test_folder() + "/./agree-0.h5 (2 of 2) is the same file as " + good[0]);
  require_failure(good[0] + "," + test_folder() + "/agree-9.h5",
                  "cannot open shard " + test_folder() + "/agree-9.h5 (2 of 2): No such file or directory");
}

TEST_CASE("the dataset fingerprint covers the shards' order and row counts, not their folder", "[mpi][io][shards]") {
  // No labels: nothing but the shards themselves tells these datasets apart.
  const auto unlabelled = [](std::int64_t rows) {
    return [=](const std::string& p) {
      H5File file = create_file(p);
      const std::vector<float> samples(static_cast<std::size_t>(rows) * 2, 1.0f);
      write_dataset(file.get(), "/samples", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {static_cast<hsize_t>(rows), 2},
                    samples.data(), layouts()[0]);
    };
  };
  const std::string a = make_file("fp_a", unlabelled(100)), b = make_file("fp_b", unlabelled(100));
  // The same files in another folder, and files of the same names split at another row.
  const std::string moved = test_folder() + "/moved", resplit = test_folder() + "/resplit";
  world().collective_try([&] {
    if (!world().is_root()) return;
    REQUIRE(mkdir(moved.c_str(), 0700) == 0);
    REQUIRE(mkdir(resplit.c_str(), 0700) == 0);
    for (const char* name : {"fp_a.h5", "fp_b.h5"})
      REQUIRE(std::system(("cp " + test_folder() + "/" + name + " " + moved).c_str()) == 0);
    unlabelled(150)(resplit + "/fp_a.h5");
    unlabelled(50)(resplit + "/fp_b.h5");
  });
  const auto fingerprint = [](const std::string& spec) {
    std::unique_ptr<BatchReader> reader = open_reader(world(), spec, ReaderOptions{});
    return dataset_fingerprint(reader->info(), reader->labels(), reader->lengths(), DatasetKeys{});
  };
  const std::uint64_t ab = fingerprint(a + "," + b);
  REQUIRE_ON_ALL_RANKS(fingerprint(moved + "/fp_a.h5," + moved + "/fp_b.h5") == ab);
  REQUIRE_ON_ALL_RANKS(fingerprint(b + "," + a) != ab);
  REQUIRE_ON_ALL_RANKS(fingerprint(resplit + "/fp_a.h5," + resplit + "/fp_b.h5") != ab);
}

namespace {

/// Rank 0 writes a virtual dataset `key` [rows, ...] (type `type`) in `path` from whole sources:
/// (source file name as stored, source dataset, first row, rows, per-row shape).
struct Mapping {
  std::string file, dataset;
  hsize_t first_row, rows;
  hsize_t source_first = 0;  ///< the source's first mapped row (its rows: source_first + rows)
};
void write_virtual(hid_t file, const std::string& key, hid_t type, std::vector<hsize_t> dims,
                   const std::vector<Mapping>& mappings) {
  H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), key));
  H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), key));
  for (const Mapping& mapping : mappings) {
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = mapping.first_row;
    count[0] = mapping.rows;
    H5Dataspace target(STRIDER_H5_CHECK(H5Scopy(space.get()), key));
    STRIDER_H5_CHECK(H5Sselect_hyperslab(target.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                     key);
    std::vector<hsize_t> source_dims = count;
    source_dims[0] += mapping.source_first;
    H5Dataspace source(
        STRIDER_H5_CHECK(H5Screate_simple(static_cast<int>(source_dims.size()), source_dims.data(), nullptr), key));
    if (mapping.source_first != 0) {
      std::vector<hsize_t> source_start(dims.size(), 0);
      source_start[0] = mapping.source_first;
      STRIDER_H5_CHECK(
          H5Sselect_hyperslab(source.get(), H5S_SELECT_SET, source_start.data(), nullptr, count.data(), nullptr), key);
    }
    STRIDER_H5_CHECK(
        H5Pset_virtual(create.get(), target.get(), mapping.file.c_str(), mapping.dataset.c_str(), source.get()), key);
  }
  H5Dataset dataset(
      STRIDER_H5_CHECK(H5Dcreate2(file, key.c_str(), type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), key));
}

}  // namespace

TEST_CASE("a virtual dataset of whole sources reads as its sources, with every engine", "[mpi][io][shards][vds]") {
  const FixedCase test{"vds", ElementType::float32, H5T_IEEE_F32LE, {301, 5}};
  const WrittenData data = fixed_data(test);
  const std::vector<std::string> sources =
      make_shards("vds_source", data, test.file_type, test.dims, {100, 101, 250}, {layouts()[0]});
  const std::vector<hsize_t> firsts = {0, 100, 101, 250}, counts = {100, 1, 149, 51};
  // Sources named relative to the virtual file's folder, listed out of order.
  std::vector<Mapping> samples, labels;
  for (const std::size_t k : {2u, 0u, 3u, 1u}) {
    const std::string name = "vds_source-" + std::to_string(k) + ".h5";
    samples.push_back({name, "/samples", firsts[k], counts[k]});
    labels.push_back({name, "/labels", firsts[k], counts[k]});
  }
  const std::string whole = make_file("vds_whole", [&](const std::string& p) {
    H5File file = create_file(p);
    write_virtual(file.get(), "/samples", H5T_IEEE_F32LE, {301, 5}, samples);
    write_virtual(file.get(), "/labels", H5T_STD_I64LE, {301}, labels);
  });
  check_every_engine(whole, "", false, data);
  std::unique_ptr<BatchReader> reader = open_reader(world(), whole, ReaderOptions{});
  REQUIRE_ON_ALL_RANKS(reader->info().shards.size() == 4);
  REQUIRE_ON_ALL_RANKS(reader->info().shards[1].path == test_folder() + "/vds_source-1.h5");
  REQUIRE_ON_ALL_RANKS(reader->info().shards[2].first_row == 101);

  // A missing source, a gap, and a source of labels that is missing: one line each.
  auto virtual_file = [&](std::vector<Mapping> data_mappings, std::vector<Mapping> label_mappings) {
    return [=](const std::string& p) {
      H5File file = create_file(p);
      write_virtual(file.get(), "/samples", H5T_IEEE_F32LE, {301, 5}, data_mappings);
      if (!label_mappings.empty()) write_virtual(file.get(), "/labels", H5T_STD_I64LE, {301}, label_mappings);
    };
  };
  std::vector<Mapping> missing = samples;
  missing[3].file = "vds_gone.h5";
  require_failure(make_file("vds_missing", virtual_file(missing, {})),
                  "the source file vds_gone.h5 of virtual /samples rows 100..100 is missing");
  std::vector<Mapping> gap = samples;
  gap.erase(gap.begin());  // rows 101..249
  require_failure(make_file("vds_gap", virtual_file(gap, {})),
                  "virtual /samples rows 101..249 map to no source (HDF5 would read them as fill values)");
  std::vector<Mapping> missing_labels = labels;
  missing_labels[0].file = "vds_gone.h5";
  require_failure(make_file("vds_missing_labels", virtual_file(samples, missing_labels)),
                  "the source file vds_gone.h5 of virtual /labels rows 101..249 is missing");
  // A row mapped twice, a part of a source, and printf-style source names: one line each too.
  std::vector<Mapping> twice = samples;
  twice.push_back({"vds_source-1.h5", "/samples", 120, 1});  // row 120 is vds_source-2's already
  require_failure(make_file("vds_twice", virtual_file(twice, {})), "virtual /samples maps two sources to row 120");
  std::vector<Mapping> partial = samples;
  partial[1].rows = 50;  // rows 50..99 of vds_source-0's 100 rows, at rows 0..49
  partial[1].source_first = 50;
  require_failure(make_file("vds_partial", virtual_file(partial, {})),
                  "virtual /samples maps part of vds_source-0.h5 /samples or part of a row; strider reads virtual "
                  "datasets made of whole sources stacked along rows");
  // Its first rows: HDF5 keeps no source extent for a mapping of a source's first rows, so it is the
  // source itself that holds more rows than mapped.
  std::vector<Mapping> first_rows = samples;
  first_rows[1].rows = 50;
  first_rows.push_back({"vds_source-3.h5", "/samples", 50, 50});  // rows 50..99 mapped from elsewhere
  first_rows.back().source_first = 0;
  require_failure(make_file("vds_first_rows", virtual_file(first_rows, {})),
                  "of virtual /samples does not hold the 50 rows its mapping says");
  // HDF5 takes printf-style names only in an unlimited mapping: blocks of 100 rows, vds_source-0.h5,
  // vds_source-1.h5, ...
  const auto printf_style = [](const std::string& p) {
    H5File file = create_file(p);
    const std::string key = "/samples";
    const hsize_t dims[2] = {100, 5}, most[2] = {H5S_UNLIMITED, 5};
    const hsize_t start[2] = {0, 0}, stride[2] = {100, 1}, count[2] = {H5S_UNLIMITED, 1}, block[2] = {100, 5};
    H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(2, dims, most), key));
    STRIDER_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, stride, count, block), key);
    H5Dataspace source(STRIDER_H5_CHECK(H5Screate_simple(2, dims, nullptr), key));
    H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), key));
    STRIDER_H5_CHECK(H5Pset_virtual(create.get(), space.get(), "vds_source-%b.h5", "/samples", source.get()), key);
    H5Dataset dataset(STRIDER_H5_CHECK(
        H5Dcreate2(file.get(), key.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), key));
  };
  require_failure(make_file("vds_printf", printf_style),
                  "virtual /samples names its sources printf-style (vds_source-%b.h5 /samples); list the source "
                  "files as shards instead");
  require_failure(whole + "," + sources[0], "/samples is a virtual dataset: open it on its own");
}
