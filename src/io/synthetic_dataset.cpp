// strider-gen's library part: synthetic features, images and sequences written collectively.
#include "strider/io/synthetic_dataset.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "core/test_hooks.hpp"
#include "io/reader_detail.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/float16.hpp"
#include "strider/core/hash.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"

namespace strider {
namespace {

/// A counter-based stream (SplitMix64) seeded from (seed, purpose, item): any rank can produce the
/// numbers of any row.
class RowRandom {
 public:
  RowRandom(std::int64_t seed, std::uint64_t purpose, std::uint64_t item)
      : state_(derive_seed(seed, static_cast<std::int64_t>(purpose), item)) {}
  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  /// Uniform in (0, 1].
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * (1.0 / 9007199254740992.0); }
  double gaussian() {
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    return radius * std::cos(6.283185307179586 * uniform());
  }
  std::uint64_t below(std::uint64_t bound) { return bound <= 1 ? 0 : next() % bound; }

 private:
  std::uint64_t state_;
};

enum Purpose : std::uint64_t { kRow = 1, kCentre = 2, kLength = 3, kPattern = 4 };

/// This rank's part of one collective H5Dwrite: the block [first, first + count) along dimension 0
/// (count may be 0: the rank takes part with an empty selection), selected and checked before any
/// rank writes, so that what can fail on one rank alone fails where the ranks can still agree.
struct BlockWrite {
  hid_t dataset = H5I_INVALID_HID;
  hid_t memory_type = H5I_INVALID_HID;
  const void* values = nullptr;
  std::string what;  // "/samples rows 0..128"
  H5Dataspace file_space, memory_space;
};

BlockWrite prepare_block(hid_t dataset, hid_t memory_type, const std::vector<hsize_t>& dims, std::int64_t first,
                         std::int64_t count, const void* values, const std::string& key) {
  BlockWrite block;
  block.dataset = dataset;
  block.memory_type = memory_type;
  block.values = values;
  block.what = key + " rows " + std::to_string(first) + ".." + std::to_string(first + count);
  block.file_space.reset(STRIDER_H5_CHECK(H5Dget_space(dataset), "getting the dataspace of " + key));
  H5Dataspace& file_space = block.file_space;
  std::vector<hsize_t> start(dims.size(), 0), extent = dims;
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  hsize_t elements = 1;
  for (hsize_t e : extent) elements *= e;
  const hsize_t memory_elements = std::max<hsize_t>(elements, 1);
  block.memory_space.reset(STRIDER_H5_CHECK(H5Screate_simple(1, &memory_elements, nullptr), "creating a memory space"));
  H5Dataspace& memory_space = block.memory_space;
  if (elements == 0) {
    STRIDER_H5_CHECK(H5Sselect_none(file_space.get()), "selecting nothing");
    STRIDER_H5_CHECK(H5Sselect_none(memory_space.get()), "selecting nothing");
  } else {
    STRIDER_H5_CHECK(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr),
        "selecting " + key + " rows");
  }
  const hssize_t in_file = STRIDER_H5_CHECK(H5Sget_select_npoints(file_space.get()), "counting " + block.what);
  const hssize_t in_memory = STRIDER_H5_CHECK(H5Sget_select_npoints(memory_space.get()), "counting " + block.what);
  if (in_file != in_memory || in_file != static_cast<hssize_t>(elements))
    STRIDER_THROW(Error, "writing " + block.what + ": " + std::to_string(in_memory) + " values in memory for " +
                             std::to_string(in_file) + " selected in the file (" + std::to_string(elements) +
                             " expected)");
  return block;
}

/// One collective H5Dwrite of a prepared block; throws Hdf5Error. `injected_failure`
/// (STRIDER_TEST_FAIL_WRITE): HDF5 is given an invalid memory space, which it refuses on this rank
/// alone while the other ranks go into the write's MPI-IO collective.
void write_block(const BlockWrite& block, hid_t transfer, bool injected_failure) {
  const hid_t memory_space = injected_failure ? H5I_INVALID_HID : block.memory_space.get();
  STRIDER_H5_CHECK(
      H5Dwrite(block.dataset, block.memory_type, memory_space, block.file_space.get(), transfer, block.values),
      "writing " + block.what + (injected_failure ? " (injected: STRIDER_TEST_FAIL_WRITE)" : ""));
}

/// Runs `body`, collective HDF5 calls that the ranks cannot agree around: a call that fails on one
/// rank may leave the others inside it, waiting in MPI-IO for this rank, where no agreement reaches
/// them. So a failure with several ranks prints this rank's error as one line and ends the job
/// (MPI_Abort); with one rank it is thrown as it is.
template <typename Body>
void run_or_abort_job(const Communicator& comm, Body&& body) {
  try {
    body();
  } catch (const std::exception& error) {
    if (comm.size() == 1) throw;
    print_error_line(error_message(error) +
                     "; the other ranks may be waiting inside this collective write: " + "aborting the job");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the launcher forwards the line first
    MPI_Abort(comm.native(), 1);
    throw;  // not reached: MPI_Abort does not return
  }
}

H5Dataset create_dataset(hid_t file, const std::string& key, hid_t file_type, const std::vector<hsize_t>& dims,
                         std::int64_t chunk_rows, int compression) {
  H5Dataspace space(STRIDER_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                                     "creating the shape of " + key));
  H5PropertyList create(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), "creating " + key));
  STRIDER_H5_CHECK(H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER), "creating " + key);
  // No modification times in the object headers: the file is byte-identical for one seed.
  STRIDER_H5_CHECK(H5Pset_obj_track_times(create.get(), false), "creating " + key);
  if (chunk_rows > 0 && dims[0] > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = static_cast<hsize_t>(std::min<std::int64_t>(chunk_rows, static_cast<std::int64_t>(dims[0])));
    STRIDER_H5_CHECK(H5Pset_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data()), "chunking " + key);
    if (compression > 0)
      STRIDER_H5_CHECK(H5Pset_deflate(create.get(), static_cast<unsigned>(compression)), "compressing " + key);
  }
  H5PropertyList link(STRIDER_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), "creating " + key));
  STRIDER_H5_CHECK(H5Pset_create_intermediate_group(link.get(), 1), "creating the groups of " + key);
  return H5Dataset(STRIDER_H5_CHECK(
      H5Dcreate2(file, key.c_str(), file_type, space.get(), link.get(), create.get(), H5P_DEFAULT), "creating " + key));
}

/// Rows [begin, end) of this rank: blocks of whole `align` units, as even as possible.
std::pair<std::int64_t, std::int64_t> rank_rows(const Communicator& comm, std::int64_t rows, std::int64_t align) {
  const std::int64_t units = (rows + align - 1) / align;
  const std::int64_t first = units * comm.rank() / comm.size(), last = units * (comm.rank() + 1) / comm.size();
  return {std::min(rows, first * align), std::min(rows, last * align)};
}

class Generator {
 public:
  Generator(const SyntheticOptions& options, std::vector<std::int64_t> counts)
      : options_(options), ends_(std::move(counts)) {
    std::partial_sum(ends_.begin(), ends_.end(), ends_.begin());
  }
  std::int64_t rows() const { return ends_.empty() ? 0 : ends_.back(); }
  std::int32_t label(std::int64_t row) const {
    return static_cast<std::int32_t>(std::upper_bound(ends_.begin(), ends_.end(), row) - ends_.begin());
  }
  std::int64_t classes() const { return static_cast<std::int64_t>(ends_.size()); }

  void features(std::int64_t row, float* out) const {
    RowRandom random(options_.seed, kRow, static_cast<std::uint64_t>(row));
    const std::int64_t c = label(row);
    for (std::int64_t d = 0; d < options_.dim; ++d) {
      RowRandom centre(options_.seed, kCentre, static_cast<std::uint64_t>(c * options_.dim + d));
      out[d] = static_cast<float>(centre.gaussian() + options_.noise * random.gaussian());
    }
  }
  /// Images: a coarse per-class pattern (8x8-pixel cells) plus noise.
  void image(std::int64_t row, std::uint8_t* out) const {
    RowRandom random(options_.seed, kRow, static_cast<std::uint64_t>(row));
    const std::int64_t c = label(row);
    for (std::int64_t channel = 0; channel < options_.channels; ++channel)
      for (std::int64_t y = 0; y < options_.height; ++y)
        for (std::int64_t x = 0; x < options_.width; ++x) {
          const std::uint64_t cell =
              static_cast<std::uint64_t>(((c * options_.channels + channel) * 4096 + y / 8) * 4096 + x / 8);
          const double base = 32 + static_cast<double>(mix64(cell ^ static_cast<std::uint64_t>(options_.seed)) % 192);
          const double value = std::round(base + 16.0 * random.gaussian());
          *out++ = static_cast<std::uint8_t>(std::clamp(value, 0.0, 255.0));
        }
  }
  /// Records: bytes of a counter-based stream, 8 at a time (cheap enough for 100 MB samples).
  void record(std::int64_t row, std::uint8_t* out) const {
    RowRandom random(options_.seed, kRow, static_cast<std::uint64_t>(row));
    for (std::int64_t at = 0; at < options_.record_bytes; at += 8) {
      const std::uint64_t value = random.next();
      std::memcpy(out + at, &value, static_cast<std::size_t>(std::min<std::int64_t>(8, options_.record_bytes - at)));
    }
  }
  std::int64_t length(std::int64_t row) const {
    RowRandom random(options_.seed, kLength, static_cast<std::uint64_t>(row));
    const double value = std::exp(std::log(static_cast<double>(options_.median_length)) + 0.6 * random.gaussian());
    return std::clamp<std::int64_t>(std::llround(value), options_.min_length, options_.max_length);
  }
  /// Tokens: half of them are label + K * j (so token % K predicts the label), the rest uniform.
  void tokens(std::int64_t row, std::int32_t* out) const {
    RowRandom random(options_.seed, kRow, static_cast<std::uint64_t>(row));
    const auto vocab = static_cast<std::uint64_t>(options_.vocab);
    const auto k = static_cast<std::uint64_t>(classes());
    const std::uint64_t bands = vocab / k;
    const std::int64_t count = length(row);
    for (std::int64_t t = 0; t < count; ++t) {
      const bool informative = bands > 0 && (random.next() & 1) != 0;
      out[t] = static_cast<std::int32_t>(informative ? static_cast<std::uint64_t>(label(row)) + k * random.below(bands)
                                                     : random.below(vocab));
    }
  }

 private:
  const SyntheticOptions& options_;
  std::vector<std::int64_t> ends_;
};

void check_options(const SyntheticOptions& options) {
  if (options.kind != "features" && options.kind != "images" && options.kind != "sequences" &&
      options.kind != "records")
    STRIDER_THROW(UsageError, "--kind must be features, images, sequences or records, got '" + options.kind + "'");
  if (options.record_bytes <= 0) STRIDER_THROW(UsageError, "--record-bytes must be positive");
  if (options.alignment_bytes < 0) STRIDER_THROW(UsageError, "--align must be >= 0");
  if (options.layout != "contiguous" && options.layout != "chunked")
    STRIDER_THROW(UsageError, "--layout must be contiguous or chunked, got '" + options.layout + "'");
  if (options.compression < 0 || options.compression > 9) STRIDER_THROW(UsageError, "--compress must be 0..9");
  if (options.chunk_rows < 0) STRIDER_THROW(UsageError, "--chunk-rows must be >= 0");
  if (options.dim <= 0 || options.channels <= 0 || options.height <= 0 || options.width <= 0)
    STRIDER_THROW(UsageError, "--dim, --channels, --height and --width must be positive");
  if (options.min_length < 0 || options.min_length > options.max_length || options.median_length <= 0)
    STRIDER_THROW(UsageError, "sequence lengths need 0 <= --min-len <= --max-len and --median-len > 0");
  if (options.vocab <= 0 || options.vocab > (std::int64_t{1} << 31))
    STRIDER_THROW(UsageError, "--vocab must be in 1..2^31");
  if (!std::isfinite(options.noise) || options.noise < 0) STRIDER_THROW(UsageError, "--noise must be >= 0");
  if (options.dtype != "float32" && options.dtype != "float16")
    STRIDER_THROW(UsageError, "--dtype must be float32 or float16, got '" + options.dtype + "'");
  if (options.dtype != "float32" && options.kind != "features")
    STRIDER_THROW(UsageError, "--dtype " + options.dtype + " is for --kind features (images are uint8, tokens int32)");
}

}  // namespace

std::vector<std::int64_t> synthetic_class_counts(const SyntheticOptions& options) {
  if (!options.class_counts.empty()) {
    for (std::int64_t count : options.class_counts)
      if (count < 0) STRIDER_THROW(UsageError, "--class-counts must not be negative");
    if (std::accumulate(options.class_counts.begin(), options.class_counts.end(), std::int64_t{0}) <= 0)
      STRIDER_THROW(UsageError, "--class-counts must add up to at least 1 sample");
    return options.class_counts;
  }
  if (options.samples <= 0)
    STRIDER_THROW(UsageError, "--samples must be positive, got " + std::to_string(options.samples));
  if (options.classes <= 0)
    STRIDER_THROW(UsageError, "--classes must be positive, got " + std::to_string(options.classes));
  if (!(options.imbalance >= 1.0)) STRIDER_THROW(UsageError, "--imbalance must be >= 1 (largest / smallest class)");
  const std::int64_t k = options.classes;
  std::vector<double> weights(static_cast<std::size_t>(k));
  for (std::int64_t c = 0; c < k; ++c)
    weights[c] = k == 1 ? 1.0 : std::pow(options.imbalance, -static_cast<double>(c) / static_cast<double>(k - 1));
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(k));
  std::int64_t assigned = 0;
  for (std::int64_t c = 0; c < k; ++c) {
    counts[c] = static_cast<std::int64_t>(std::floor(static_cast<double>(options.samples) * weights[c] / total));
    assigned += counts[c];
  }
  for (std::int64_t c = 0; assigned < options.samples; c = (c + 1) % k, ++assigned) ++counts[c];
  return counts;
}

SyntheticSummary write_synthetic_dataset(const Communicator& comm, const std::string& path,
                                         const SyntheticOptions& options) {
  silence_hdf5_errors();
  SyntheticSummary summary;
  const bool sequences = options.kind == "sequences";
  std::int64_t sample_elements = 0, element_size = 0, chunk_rows = 0;
  comm.collective_try([&] {
    check_options(options);
    summary.class_counts = synthetic_class_counts(options);
    sample_elements = options.kind == "features"  ? options.dim
                      : options.kind == "images"  ? options.channels * options.height * options.width
                      : options.kind == "records" ? options.record_bytes
                                                  : 1;
    element_size = options.kind == "images" || options.kind == "records" ? 1 : options.dtype == "float16" ? 2 : 4;
    if (options.layout == "chunked" || options.compression > 0)
      chunk_rows = options.chunk_rows > 0 ? options.chunk_rows
                                          : std::max<std::int64_t>(1, 65536 / (sample_elements * element_size));
  });
  const Generator generator(options, summary.class_counts);
  summary.samples = generator.rows();
  const std::int64_t rows = summary.samples;
  // Data the file system cannot hold: one line now, rather than a collective write that fails on
  // some ranks only, leaving the others in another HDF5 call. Sequences: a lower bound (every one of
  // --min-len tokens, plus its offset), known without drawing a length per row.
  comm.collective_try([&] {
    if (!comm.is_root()) return;
    const double needed = sequences
                              ? static_cast<double>(rows) * static_cast<double>(options.min_length * 4 + 8 + 4)
                              : static_cast<double>(rows) * static_cast<double>(sample_elements * element_size + 4);
    const std::size_t slash = path.find_last_of('/');
    const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct statvfs file_system {};
    if (::statvfs(directory.c_str(), &file_system) != 0) return;  // H5Fcreate says why
    if (file_system.f_blocks == 0) return;                        // no size to tell (ramfs grows)
    const double available = static_cast<double>(file_system.f_bavail) * static_cast<double>(file_system.f_frsize);
    const auto bytes = [](double value) { return format_bytes(static_cast<std::int64_t>(std::min(value, 9e18))); };
    if (needed > available)
      STRIDER_THROW(UsageError, path + " needs " + (sequences ? "at least " : "") + bytes(needed) + " (" +
                                    std::to_string(rows) + (sequences ? " sequences" : " samples") +
                                    "), and its file system has " + bytes(available) + " free");
  });

  H5File file = comm.collective_try([&] {
    H5PropertyList access(STRIDER_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), "creating a file access property list"));
    STRIDER_H5_CHECK(H5Pset_fapl_mpio(access.get(), comm.native(), MPI_INFO_NULL), "selecting the MPI-IO driver");
    STRIDER_H5_CHECK(H5Pset_coll_metadata_write(access.get(), true), "making metadata writes collective");
    if (options.alignment_bytes > 0) {
      const auto alignment = static_cast<hsize_t>(options.alignment_bytes);
      STRIDER_H5_CHECK(H5Pset_alignment(access.get(), alignment, alignment), "aligning the datasets");
    }
    return H5File(
        STRIDER_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), "creating " + path));
  });
  H5PropertyList transfer(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_XFER), "creating a transfer property list"));
  STRIDER_H5_CHECK(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), "selecting collective transfer");

  // This rank's rows, aligned to chunks of fixed-size data so that ranks do not share a chunk.
  const auto [begin, end] = rank_rows(comm, rows, sequences || chunk_rows == 0 ? 1 : chunk_rows);
  // Tokens before this rank's first row (sequences): lengths are pure functions of the row.
  std::int64_t my_tokens = 0, token_begin = 0;
  if (sequences) {
    for (std::int64_t row = begin; row < end; ++row) my_tokens += generator.length(row);
    const std::vector<std::int64_t> all = comm.all_gather(my_tokens);
    for (int r = 0; r < comm.rank(); ++r) token_begin += all[static_cast<std::size_t>(r)];
    summary.tokens = std::accumulate(all.begin(), all.end(), std::int64_t{0});
  }

  const std::string& data_key = sequences ? options.keys.tokens : options.keys.data;
  std::vector<hsize_t> data_dims;
  if (sequences) {
    data_dims = {static_cast<hsize_t>(summary.tokens)};
  } else if (options.kind == "features") {
    data_dims = {static_cast<hsize_t>(rows), static_cast<hsize_t>(options.dim)};
  } else if (options.kind == "records") {
    data_dims = {static_cast<hsize_t>(rows), static_cast<hsize_t>(options.record_bytes)};
  } else {
    data_dims = {static_cast<hsize_t>(rows), static_cast<hsize_t>(options.channels),
                 static_cast<hsize_t>(options.height), static_cast<hsize_t>(options.width)};
  }
  const bool half = options.dtype == "float16";
  const bool bytes = options.kind == "images" || options.kind == "records";
  const hid_t file_type = bytes       ? H5T_STD_U8LE
                          : sequences ? H5T_STD_I32LE
                          : half      ? io_detail::float16_hdf5_type()
                                      : H5T_IEEE_F32LE;
  const hid_t memory_type = bytes       ? H5T_NATIVE_UINT8
                            : sequences ? H5T_NATIVE_INT32
                            : half      ? io_detail::float16_hdf5_type()
                                        : H5T_NATIVE_FLOAT;
  const bool with_labels = options.keys.labels != kNoLabelsKey;  // --label-key none: a file without labels
  H5Dataset data, labels, offsets;
  comm.collective_try([&] {
    data = create_dataset(file.get(), data_key, file_type, data_dims, chunk_rows, options.compression);
    if (with_labels)
      labels = create_dataset(file.get(), options.keys.labels, H5T_STD_I32LE, {static_cast<hsize_t>(rows)}, 0, 0);
    if (sequences)
      offsets = create_dataset(file.get(), options.keys.offsets, H5T_STD_I64LE, {static_cast<hsize_t>(rows + 1)}, 0, 0);
  });

  // Pieces of at most ~32 MiB; every rank makes the same number of collective calls.
  const std::int64_t row_bytes = sequences ? options.median_length * 4 : sample_elements * element_size;
  std::int64_t piece_rows = std::max<std::int64_t>(1, (32 << 20) / std::max<std::int64_t>(1, row_bytes));
  if (!sequences && chunk_rows > 0) piece_rows = std::max<std::int64_t>(1, piece_rows / chunk_rows) * chunk_rows;
  const std::int64_t my_pieces = (end - begin + piece_rows - 1) / piece_rows;
  const std::int64_t pieces = comm.all_reduce(my_pieces, ReduceOp::max);
  summary.bytes = sequences ? summary.tokens * 4 : rows * sample_elements * element_size;
  const bool show_progress = options.progress && summary.bytes > (std::int64_t{256} << 20) && comm.is_root();

  std::vector<std::byte> values;
  std::vector<float> features(static_cast<std::size_t>(options.dim));  // float16: one row before rounding
  std::vector<std::int32_t> piece_labels;
  std::vector<std::int64_t> piece_offsets;
  std::int64_t next_token = token_begin;
  const std::int64_t fail_write_piece = detail::test_hooks().fail_write_piece;
  std::vector<BlockWrite> writes;  // a piece's collective writes, in the same order on every rank
  // Each piece is prepared and agreed first: a rank whose generation or selection fails stops every
  // rank with its reason, before any rank goes into the piece's collective writes. A write that then
  // fails on one rank ends the job (run_or_abort_job), the others being inside the collective.
  for (std::int64_t piece = 0; piece < pieces; ++piece) {
    writes.clear();
    comm.collective_try([&] {
      const std::int64_t first = std::min(end, begin + piece * piece_rows), last = std::min(end, first + piece_rows);
      piece_labels.resize(static_cast<std::size_t>(last - first));
      for (std::int64_t row = first; row < last; ++row) piece_labels[row - first] = generator.label(row);
      if (sequences) {
        piece_offsets.clear();
        std::int64_t piece_tokens = 0;
        for (std::int64_t row = first; row < last; ++row) {
          piece_offsets.push_back(next_token + piece_tokens);
          piece_tokens += generator.length(row);
        }
        if (last == rows && last > first) piece_offsets.push_back(next_token + piece_tokens);  // offsets[N]
        values.resize(static_cast<std::size_t>(piece_tokens) * 4);
        auto* out = reinterpret_cast<std::int32_t*>(values.data());
        for (std::int64_t row = first; row < last; ++row) {
          generator.tokens(row, out);
          out += generator.length(row);
        }
        writes.push_back(
            prepare_block(data.get(), memory_type, data_dims, next_token, piece_tokens, values.data(), data_key));
        writes.push_back(prepare_block(offsets.get(), H5T_NATIVE_INT64, {static_cast<hsize_t>(rows + 1)}, first,
                                       static_cast<std::int64_t>(piece_offsets.size()), piece_offsets.data(),
                                       options.keys.offsets));
        next_token += piece_tokens;
      } else {
        values.resize(static_cast<std::size_t>((last - first) * sample_elements * element_size));
        for (std::int64_t row = first; row < last; ++row) {
          std::byte* out = values.data() + (row - first) * sample_elements * element_size;
          if (options.kind == "features" && half) {
            generator.features(row, features.data());
            for (std::int64_t d = 0; d < options.dim; ++d) {
              const std::uint16_t bits = float32_to_float16(features[d]);
              std::memcpy(out + d * 2, &bits, 2);
            }
          } else if (options.kind == "features") {
            generator.features(row, reinterpret_cast<float*>(out));
          } else if (options.kind == "records") {
            generator.record(row, reinterpret_cast<std::uint8_t*>(out));
          } else {
            generator.image(row, reinterpret_cast<std::uint8_t*>(out));
          }
        }
        writes.push_back(
            prepare_block(data.get(), memory_type, data_dims, first, last - first, values.data(), data_key));
      }
      if (with_labels)
        writes.push_back(prepare_block(labels.get(), H5T_NATIVE_INT32, {static_cast<hsize_t>(rows)}, first,
                                       last - first, piece_labels.data(), options.keys.labels));
    });
    run_or_abort_job(comm, [&] {
      for (const BlockWrite& write : writes)
        write_block(write, transfer.get(), piece == fail_write_piece && &write == &writes.front());
    });
    if (show_progress)
      print_on_root("strider-gen: " + std::to_string((piece + 1) * 100 / pieces) + "% written (" + path + ")");
  }
  return summary;
}

}  // namespace strider
