#pragma once
/// \file
/// Writing synthetic datasets in strider's format (what strider-gen does), in parallel: every rank
/// generates and writes its own block of rows with collective HDF5 writes. Row i is a pure function
/// of (seed, i), so the file is byte-identical whatever the number of ranks.

#include <cstdint>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

/// What to generate.
struct SyntheticOptions {
  std::string kind = "features";           ///< features | images | sequences | records
  std::int64_t samples = 10000;            ///< N (ignored when class_counts is given: their sum)
  std::vector<std::int64_t> class_counts;  ///< labels in blocks: the first class_counts[0] rows are class 0, ...
  std::int64_t classes = 10;               ///< K, when class_counts is empty
  double imbalance = 1.0;                  ///< largest / smallest class count, classes geometric in between
  std::int64_t seed = 0;
  std::int64_t dim = 64;  ///< features: floats per sample
  /// features: the stored element type, float32 or float16 (IEEE binary16, as h5py writes
  /// np.float16: each value rounded to the nearest half)
  std::string dtype = "float32";
  double noise = 1.0;  ///< features: standard deviation around the class centre (centres ~ N(0, 1))
  std::int64_t channels = 3, height = 32, width = 32;                 ///< images: uint8 [N, C, H, W]
  std::int64_t min_length = 4, max_length = 512, median_length = 64;  ///< sequences: log-normal lengths, clamped
  std::int64_t vocab = 1000;                                          ///< sequences: int32 tokens in [0, vocab)
  std::int64_t record_bytes = 4096;  ///< records: uint8 [N, record_bytes] of pseudo-random bytes (opaque samples)
  /// > 0: every dataset of at least this many bytes starts at a multiple of it in the file
  /// (H5Pset_alignment); kDirectIoAlignmentBytes makes rows of whole blocks aligned for O_DIRECT.
  std::int64_t alignment_bytes = 0;
  std::string layout = "contiguous";  ///< contiguous | chunked
  std::int64_t chunk_rows = 0;        ///< chunked: rows (sequences: tokens) per chunk; 0: about 64 KiB
  int compression = 0;                ///< deflate level 0..9 (> 0 implies chunked)
  DatasetKeys keys;
  bool progress = true;  ///< print a progress line on rank 0 for files above 256 MiB
};

/// The class counts the options describe (class_counts, or `classes` with `imbalance` over `samples`).
/// Throws UsageError for impossible options.
std::vector<std::int64_t> synthetic_class_counts(const SyntheticOptions& options);

/// What was written.
struct SyntheticSummary {
  std::int64_t samples = 0;
  std::int64_t tokens = 0;  ///< sequences
  std::int64_t bytes = 0;   ///< samples or tokens bytes
  std::vector<std::int64_t> class_counts;
};

/// Collective over comm: every rank must call with the same options. Creates `path` (truncating it)
/// with the MPI-IO driver and writes the datasets. Errors are agreed (AgreedError on every rank).
SyntheticSummary write_synthetic_dataset(const Communicator& comm, const std::string& path,
                                         const SyntheticOptions& options);

}  // namespace strider
