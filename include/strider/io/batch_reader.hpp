#pragma once
/// \file
/// Reading a sampler's batch (global sample indices, in batch order) from a dataset in one HDF5 file
/// or split over several (shards, strider/io/data_paths.hpp: their rows concatenated) into
/// caller-owned memory. Engines: `hdf5` (every layout), `direct` (contiguous, uncompressed: file
/// offset + pread), `mmap` (contiguous, uncompressed: mapped file, memcpy gather); `auto` picks by
/// layout. Every engine returns identical bytes for the same plan, and reads each shard on its own
/// (not a collective MPI-IO open: a rank opens only the shards it reads).
///
/// Thread model: Debian's parallel HDF5 is not thread-safe. open_reader (collective) validates on
/// the calling thread of rank 0; afterwards exactly one thread (the I/O thread) calls read().

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/core/element_type.hpp"
#include "strider/core/shared_view.hpp"

namespace strider {

/// DatasetKeys::labels of the default name: read when the file has it, else the data has no labels.
inline constexpr std::string_view kDefaultLabelsKey = "/labels";
/// DatasetKeys::labels that reads no labels (`--label-key none`; a dataset called none is "/none").
inline constexpr std::string_view kNoLabelsKey = "none";

/// Dataset names inside the file (the apps' --data-key, --label-key, --tokens-key, --offsets-key).
struct DatasetKeys {
  std::string data = "/samples";  ///< fixed-size samples [N, ...]
  /// Integer labels [N]. The default is optional unless a class-aware mode needs labels; any other
  /// name must exist (a misspelt name is an error, not data without labels); kNoLabelsKey: none.
  std::string labels = std::string(kDefaultLabelsKey);
  std::string tokens = "/tokens";    ///< variable-length sequences: all tokens [T]
  std::string offsets = "/offsets";  ///< int64 [N+1]: row i is tokens[offsets[i]:offsets[i+1]]
};

/// One file of a dataset split over several (or the one file): its rows are global rows
/// [first_row, first_row + rows).
struct DatasetShard {
  std::string path;
  std::int64_t first_row = 0;
  std::int64_t rows = 0;
};

/// What open_reader found in the file (or files).
struct DatasetInfo {
  std::string path;                        ///< what was opened: the --data value (a file, a list, a glob, ...)
  std::vector<DatasetShard> shards;        ///< the files in global row order (one for a single file)
  bool variable_length = false;            ///< sequences (tokens + offsets) rather than fixed-size samples
  std::int64_t num_samples = 0;            ///< N
  std::vector<std::int64_t> sample_shape;  ///< shape of one fixed-size sample ({64}, {3, 32, 32}); empty for sequences
  ElementType element_type = ElementType::float32;  ///< type of the samples (or tokens)
  std::int64_t sample_bytes = 0;                    ///< bytes of one fixed-size sample (0 for sequences)
  std::int64_t num_tokens = 0;                      ///< T, for sequences
  bool has_labels = false;
  bool labels_per_batch = false;          ///< labels are read with each batch, not held (labels() is empty)
  std::string layout;                     ///< "contiguous", "chunked" or "compact" (of samples / tokens)
  std::vector<std::int64_t> chunk_shape;  ///< when chunked
  bool compressed = false;                ///< any filter on the data
  /// Compressed data: its filters and who undoes them, e.g. "deflate, inflated by strider with
  /// libdeflate" or "deflate + fletcher32, through HDF5's filters (fletcher32 checksums)"; "mixed"
  /// when the shards differ; empty when uncompressed.
  std::string compression;
};

/// Where read() puts a batch of `count` samples. All memory is the caller's.
struct BatchDestination {
  std::byte* samples = nullptr;             ///< the samples (or tokens) back to back, in batch order
  std::int64_t samples_capacity_bytes = 0;  ///< size of `samples`; read() throws if the batch does not fit
  std::int32_t* labels = nullptr;           ///< count labels (nullptr: not wanted; ignored without labels)
  std::int64_t* offsets = nullptr;          ///< sequences: count+1 token offsets into `samples` (nullptr: not wanted)
};

/// One batch of a read_batches() call: read(indices, count, destination) as one of several.
struct BatchRead {
  const std::int64_t* indices = nullptr;
  std::int64_t count = 0;
  BatchDestination destination;
};

/// Counters of one reader (this rank).
struct ReadStats {
  std::int64_t bytes_read = 0;    ///< bytes read from the file (including whole chunks)
  std::int64_t useful_bytes = 0;  ///< bytes of the samples delivered
  std::int64_t batches = 0;
  std::int64_t read_calls = 0;       ///< pread / H5Dread / memcpy-run calls
  double read_seconds = 0.0;         ///< time inside read()
  std::int64_t bytes_local = 0;      ///< in-memory store: bytes copied from this node's memory
  std::int64_t bytes_remote = 0;     ///< in-memory store: bytes received from other nodes
  std::int64_t remote_requests = 0;  ///< in-memory store: requests to other nodes (one reply each)
  /// Part of read_seconds spent on labels apart from the samples (0 where an engine copies each
  /// row's label with the row).
  double labels_seconds = 0.0;
};

/// The most threads one reader may copy or inflate with (ReaderOptions::copy_threads): far more than
/// any node's cores, so that a typo cannot start a hundred thousand threads.
inline constexpr int kMaxCopyThreads = 1024;

/// The names ReaderOptions::engine takes: auto, hdf5, direct, mmap.
std::vector<std::string> reader_engines();

/// Options for open_reader.
struct ReaderOptions {
  DatasetKeys keys;
  std::string engine = "auto";                             ///< auto | hdf5 | direct | mmap
  bool require_labels = false;                             ///< class-aware modes: a missing labels dataset is an error
  std::string labels_needed_by = "a class-aware sampler";  ///< who needs them, for that error
  /// true: every label is read once at open and held (4 bytes per row; class-aware samplers and the
  /// trainer need them). false: each batch's labels are read with it, so memory does not grow with N
  /// (the streaming and block modes); needs a contiguous, unfiltered labels dataset in native byte
  /// order, else the labels are held anyway (logged).
  bool labels_in_memory = true;
  /// Threads that copy one batch (direct, mmap) or inflate its deflate chunks (hdf5, where it inflates
  /// them itself); 1: the caller's thread. At most kMaxCopyThreads.
  int copy_threads = 1;
  /// Shards a reader keeps open at once (hdf5: HDF5 files, direct: descriptors; the least recently
  /// read is closed first). mmap maps the shards it reads and keeps no descriptor open.
  int max_open_files = 64;
  /// The direct engine reads with O_DIRECT, bypassing the page cache (what a storage benchmark
  /// needs without a dataset several times the memory). Every read is kDirectIoAlignmentBytes
  /// aligned in the file, in length and in memory: a row that is not (its offset or size, or its
  /// place in the destination) is read through an aligned bounce region and copied. "auto" then
  /// picks direct; hdf5 and mmap refuse it. A file system that refuses O_DIRECT is an error at open.
  /// Labels read per batch still go through the page cache.
  bool odirect = false;
  /// What `auto` picks for contiguous, unfiltered, native data: "mmap" (scattered rows, no copy
  /// through the kernel) or "direct" (one pass in file order, as the in-memory store's load: large
  /// preads, no page faults, the fastest from a cold page cache).
  std::string auto_raw_engine = "mmap";
};

/// The alignment of O_DIRECT reads (file offset, length, memory): 4 KiB, the logical block of
/// every common device and a multiple of the others (512 bytes).
inline constexpr std::int64_t kDirectIoAlignmentBytes = 4096;

/// Reads batches of one dataset. Not thread-safe: after open, one thread calls read().
class BatchReader {
 public:
  virtual ~BatchReader() = default;
  /// "hdf5", "direct" or "mmap".
  virtual std::string engine() const = 0;
  virtual const DatasetInfo& info() const = 0;
  /// Every label (read once at open); empty when the file has none or they are read per batch.
  /// Valid while the reader lives (the view may own nothing).
  virtual SharedView<std::int32_t> labels() const = 0;
  /// labels[first .. first + count) into out, from memory or, when labels are read per batch, from
  /// the file (values checked as per batch). Same thread rule as read(). Throws UsageError for a range
  /// outside [0, N) or a file without labels.
  virtual void read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) = 0;
  /// Sequences: every row's length in tokens (read once at open); empty for fixed-size samples.
  /// Valid while the reader lives (the view may own nothing).
  virtual SharedView<std::int64_t> lengths() const = 0;
  /// Bytes the samples of these indices take (count * sample_bytes, or their tokens' bytes).
  virtual std::int64_t samples_bytes(const std::int64_t* indices, std::int64_t count) const = 0;
  /// Reads samples (and labels, offsets) of indices[0..count) in that order; duplicates allowed,
  /// count may be 0. Throws Hdf5Error / SystemError naming the rows, or UsageError when the batch
  /// does not fit the destination or an index is out of range.
  virtual void read(const std::int64_t* indices, std::int64_t count, const BatchDestination& destination) = 0;
  /// Reads `count` batches, each exactly as read() would (same bytes, same errors); the batches
  /// may be read in any order and at once, so an error leaves every one of them unspecified. The
  /// default reads them one by one; a reader whose batches cost a round trip each (the in-memory
  /// store's rows of other nodes) serves them all with one.
  virtual void read_batches(const BatchRead* reads, std::int64_t count) {
    for (std::int64_t k = 0; k < count; ++k) read(reads[k].indices, reads[k].count, reads[k].destination);
  }
  /// How many batches a read_batches() call should carry to pay off (1: read() per batch is as
  /// fast). A hint: callers may pass fewer, or more.
  virtual std::int64_t batches_per_read() const { return 1; }
  virtual ReadStats stats() const = 0;
};

/// Collective over comm: every rank must call. `path` names the file or files (expand_data_paths:
/// a list, a glob, a directory, @list.txt; expanded on rank 0). Every rank checks that it can see
/// every shard; rank 0 opens each one on its own (HDF5's default sec2 driver), validates it (shapes,
/// types, labels and offsets; all shards must have the same datasets, per-sample shape and type),
/// reads labels and offsets once, and broadcasts the layout; then every rank builds the engine,
/// which opens the shards it reads on first use. Failures are agreed: every rank throws the same
/// AgreedError ("cannot open data.h5: ...").
std::unique_ptr<BatchReader> open_reader(const Communicator& comm, const std::string& path,
                                         const ReaderOptions& options);

}  // namespace strider
