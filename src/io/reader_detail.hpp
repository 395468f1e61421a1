#pragma once
// Internals shared by open_reader and the three engines: what validation found, the per-batch plan
// (rows sorted, deduplicated, coalesced into runs), and a small fork-join pool for copy threads.

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "strider/core/error.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/io/hdf5_handle.hpp"

namespace strider::io_detail {

using strider::native_hdf5_type;  // strider/io/hdf5_handle.hpp

/// IEEE 754 binary16 in the native byte order (the type h5py writes for np.float16), created on
/// first use and kept for the process.
hid_t float16_hdf5_type();

/// One shard (file) of the dataset, as rank 0 validated it and broadcast it: where its rows lie in
/// the global index and in its file, and what the engines need to read them.
struct ShardLayout {
  std::string path;      ///< the file
  std::string data_key;  ///< its samples or tokens dataset
  /// Its tokens are h5py variable-length sequences (one vlen element per row, see vlen_sequences.hpp)
  /// rather than a flat [T] dataset: positions along dimension 0 are rows, not tokens.
  bool vlen = false;
  std::int64_t first_row = 0;  ///< global index of its row 0
  std::int64_t rows = 0;
  /// The global element index (OpenedDataset::first_element) of element 0 of its data dataset:
  /// a row's element in this file is its global element minus this. Negative for sequences whose
  /// offsets start above 0.
  std::int64_t first_element = 0;
  std::int64_t elements = 0;            ///< elements of its data dataset
  std::string layout;                   ///< "contiguous", "chunked" or "compact"
  bool raw_readable = false;            ///< contiguous, unfiltered, allocated, native type: direct/mmap can read it
  std::string raw_refusal;              ///< why not, when !raw_readable
  std::int64_t file_offset_bytes = -1;  ///< H5Dget_offset of the data, when contiguous and allocated
  std::int64_t chunk_rows = 0;          ///< chunked: the chunk extent along dimension 0 (0: not chunked)
  bool compressed = false;              ///< any filter on the data
  std::int64_t average_chunk_storage_bytes = 0;  ///< chunked: stored bytes of one chunk on average
  std::int64_t chunks_across_row = 1;            ///< chunked fixed-size: chunks one row's elements span
  /// Chunked fixed-size rows (each chunk whole rows) or flat tokens in the native type, filtered by
  /// deflate alone or by shuffle then deflate: the hdf5 engine reads the chunks raw and inflates them itself (see
  /// chunk_inflate.hpp). The filters' positions in the pipeline (their bits in a chunk's filter
  /// mask); -1 when absent. deflate_filter >= 0 says the engine may.
  std::int32_t deflate_filter = -1;
  std::int32_t shuffle_filter = -1;
};

/// The shard of a global row in O(1): a table of the shard holding each block's first row, then a
/// short forward scan (blocks are no longer than the shortest shard, up to a table of 2^20 entries).
class ShardIndex {
 public:
  ShardIndex() = default;
  explicit ShardIndex(const std::vector<ShardLayout>& shards);
  /// The shard holding `row` (0 <= row < the dataset's rows).
  std::size_t shard_of(std::int64_t row) const noexcept {
    std::size_t shard = table_[static_cast<std::size_t>(row >> shift_)];
    while (row >= ends_[shard]) ++shard;
    return shard;
  }

 private:
  std::vector<std::int64_t> ends_;  // one past each shard's last row
  std::vector<std::uint32_t> table_;
  int shift_ = 62;
};

/// What open_reader validated, handed to an engine.
struct OpenedDataset {
  std::string path;  ///< what --data named (a file, a list, a glob, a directory)
  DatasetInfo info;
  std::string data_key;                         ///< samples or tokens dataset name
  std::vector<ShardLayout> shards;              ///< in global row order (one for a single file)
  std::vector<std::int32_t> labels;             ///< N, or empty (no labels, or labels read per batch)
  bool labels_per_batch = false;                ///< labels are read with each batch (see BatchLabels), not held
  std::string labels_key;                       ///< the labels dataset, when labels_per_batch (one shard only)
  ElementType label_type = ElementType::int32;  ///< its stored (native) type, when labels_per_batch
  std::int64_t labels_offset_bytes = -1;        ///< its file offset, when labels_per_batch
  std::vector<std::int64_t> offsets;            ///< sequences: N+1 global token offsets (see ShardLayout)
  std::vector<std::int64_t> lengths;            ///< sequences: N lengths
  std::int64_t row_elements = 0;                ///< fixed size: elements of one sample
  std::vector<std::int64_t> dims;               ///< the data's shape over all shards
  bool raw_readable = false;                    ///< every shard is: direct/mmap can read the data
  std::string raw_refusal;                      ///< why not (the first shard that is not), when !raw_readable
};

/// Collective over comm: every rank must call. Every rank gets rank 0's strings.
void broadcast_strings(const Communicator& comm, std::vector<std::string>& values);

/// Collective over comm: every rank must call; rank 0 holds the dataset it validated. Sends rank
/// 0's layout, labels and offsets to every rank (the lengths are computed there from the offsets).
void broadcast_dataset(const Communicator& comm, OpenedDataset& dataset);

/// A read-only file descriptor.
class FileDescriptor {
 public:
  /// Opens `path` read-only with `extra_flags` (O_DIRECT, ...) added; throws SystemError.
  explicit FileDescriptor(const std::string& path, int extra_flags = 0);
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const noexcept { return descriptor_; }

 private:
  int descriptor_;
};

/// A read-only mapping of bytes [offset, offset + bytes) of an open file (nothing for 0 bytes). The
/// pages of it already in the page cache are mapped up front: otherwise each page costs a minor fault
/// on its first touch, and the first epoch reads many times slower than the next ones.
/// Pages not cached are left alone (populating them would read the file,
/// maybe more than memory holds) and fault in on first use. Needs MADV_POPULATE_READ (Linux 5.14),
/// else maps nothing up front. A SIGBUS inside the mapping (the file truncated under it) prints one
/// line naming `what` before the process dies of it (io/mapping_faults.hpp).
class FileMapping {
 public:
  /// `what` names the bytes for the error ("the 1000 labels /labels of data.h5").
  FileMapping(int descriptor, std::int64_t offset, std::int64_t bytes, const std::string& what);
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  /// Byte `offset` of the file; null for 0 bytes.
  const std::byte* data() const noexcept { return data_; }

 private:
  void map_cached_pages() noexcept;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const std::byte* data_ = nullptr;
  int fault_slot_ = -1;  // its entry among the mappings a SIGBUS is reported for
};

/// pread of exactly `bytes` at `offset` (retries short reads and EINTR). `describe()` names what was
/// read, for the error (built only on failure).
template <class Describe>
void pread_exactly(int descriptor, std::byte* target, std::int64_t bytes, std::int64_t offset, Describe describe) {
  while (bytes > 0) {
    const ssize_t got = ::pread(descriptor, target, static_cast<std::size_t>(bytes), offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      STRIDER_THROW_ERRNO("pread()", "reading " + describe(), errno);
    }
    if (got == 0) STRIDER_THROW(DataError, "reading " + describe() + ": unexpected end of file");
    target += got;
    bytes -= got;
    offset += got;
  }
}

/// Labels read with each batch instead of held in memory (ReaderOptions::labels_in_memory false), so
/// that nothing grows with N. The labels dataset must be contiguous, unfiltered and native (open_reader
/// checks). `mapped`: the labels' bytes are mapped and gathered (the mmap engine: as fast as memory);
/// otherwise they are read with pread, nearby rows coalesced (no page of the file stays in the
/// process, so its RSS does not grow either). Values are checked per batch (they must fit int32).
class BatchLabels {
 public:
  BatchLabels(const OpenedDataset& dataset, bool mapped);
  /// out[k] = label of indices[k] (indices already checked to be in range).
  void read(const std::int64_t* indices, std::int64_t count, std::int32_t* out);
  /// out[k] = label of first + k (the range already checked).
  void read_range(std::int64_t first, std::int64_t count, std::int32_t* out);
  /// The mapped labels (label 0), or null when they are read with pread.
  const std::byte* mapped() const noexcept { return mapped_; }
  /// Bytes per stored label, and whether it is stored as int32 (needs no conversion or check).
  std::int64_t stored_bytes() const noexcept { return size_; }
  bool stored_as_int32() const noexcept { return type_ == ElementType::int32; }
  /// The label stored at `stored` (row `row`, for the error), converted to int32; throws DataError
  /// when it does not fit. Thread-safe.
  std::int32_t value(const std::byte* stored, std::int64_t row) const;

 private:
  /// The stored bytes of labels [first, first + count): in the mapping, or read into scratch_.
  const std::byte* stored(std::int64_t first, std::int64_t count);
  std::string path_, key_;
  ElementType type_;
  std::int64_t size_;    // bytes per label
  std::int64_t offset_;  // file offset of label 0
  std::int64_t rows_;
  FileDescriptor file_;
  std::unique_ptr<FileMapping> mapping_;                      // the mmap engine's
  const std::byte* mapped_ = nullptr;                         // label 0 in the mapping, or null: pread
  std::vector<std::pair<std::int64_t, std::int64_t>> order_;  // (row, position), sorted
  std::vector<std::byte> scratch_;
};

/// One batch's rows in file order. Positions are batch positions; slots index unique_rows.
struct BatchPlan {
  std::vector<std::int64_t> unique_rows;       ///< sorted, distinct
  std::vector<std::int64_t> slot_of_position;  ///< count entries
  struct Run {
    std::int64_t first_slot;
    std::int64_t slots;
    std::size_t shard;  ///< the shard all of its rows are in
  };
  std::vector<Run> runs;  ///< consecutive rows of one shard (row i+1 follows row i in its file)
  void build(const std::int64_t* indices, std::int64_t count, const ShardIndex& shards);
  /// True when the batch is its rows in file order, each once (slot k is position k): rows read in
  /// order are then the batch itself, with no scatter.
  bool in_file_order() const {
    if (unique_rows.size() != slot_of_position.size()) return false;
    for (std::size_t k = 0; k < slot_of_position.size(); ++k)
      if (slot_of_position[k] != static_cast<std::int64_t>(k)) return false;
    return true;
  }
};

/// The open files (or descriptors) of the shards a reader reads, at most `bound` at once: asking for
/// a shard that is not open opens it, closing the least recently asked-for one first. One thread.
template <typename Handle>
class ShardHandles {
 public:
  using Open = std::function<std::unique_ptr<Handle>(std::size_t shard)>;
  ShardHandles(std::size_t shards, int bound, Open open)
      : handles_(shards),
        last_use_(shards, 0),
        bound_(static_cast<std::size_t>(std::max(bound, 1))),
        open_(std::move(open)) {}
  /// The shard's handle, opened if need be.
  Handle& get(std::size_t shard) {
    last_use_[shard] = ++clock_;
    if (!handles_[shard]) {
      if (open_count_ >= bound_) close_least_recent();
      handles_[shard] = open_(shard);
      ++open_count_;
    }
    return *handles_[shard];
  }
  /// Closes every handle (e.g. before the reader goes away on another thread).
  void clear() noexcept {
    for (auto& handle : handles_) handle.reset();
    open_count_ = 0;
  }
  std::size_t bound() const noexcept { return bound_; }

 private:
  void close_least_recent() {
    std::size_t oldest = handles_.size();
    for (std::size_t shard = 0; shard < handles_.size(); ++shard)
      if (handles_[shard] && (oldest == handles_.size() || last_use_[shard] < last_use_[oldest])) oldest = shard;
    handles_[oldest].reset();
    --open_count_;
  }
  std::vector<std::unique_ptr<Handle>> handles_;
  std::vector<std::uint64_t> last_use_;
  std::uint64_t clock_ = 0;
  std::size_t open_count_ = 0;
  std::size_t bound_;
  Open open_;
};

/// Fork-join pool: run(parts, body) calls body(part) for part in [0, parts) on up to `threads`
/// threads (the caller's included) and returns when all are done. Not reentrant.
class CopyPool {
 public:
  explicit CopyPool(int threads);
  ~CopyPool();
  CopyPool(const CopyPool&) = delete;
  CopyPool& operator=(const CopyPool&) = delete;
  int threads() const noexcept { return static_cast<int>(workers_.size()) + 1; }
  /// Runs body(0..parts-1); rethrows the first exception a part threw.
  void run(int parts, const std::function<void(int)>& body);

 private:
  void worker_loop();
  void drain(std::unique_lock<std::mutex>& lock);
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* body_ = nullptr;
  int parts_ = 0, next_part_ = 0, finished_parts_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr failure_;
};

/// Where each row's label lies, for an engine that copies the labels with the rows (one pass over
/// the batch instead of two, the label fetched while the row is). Copyable; thread-safe to read.
struct RowLabels {
  const std::byte* first = nullptr;      ///< label 0 (in memory, or in the mapping)
  std::int64_t bytes = 4;                ///< per stored label
  bool int32 = true;                     ///< stored as int32: no conversion
  const BatchLabels* convert = nullptr;  ///< otherwise: converts and checks a stored value
  const std::byte* address(std::int64_t row) const noexcept { return first + row * bytes; }
  std::int32_t operator()(std::int64_t row) const {
    if (!int32) return convert->value(address(row), row);
    std::int32_t label;
    std::memcpy(&label, address(row), sizeof label);
    return label;
  }
};

/// The common part of every engine: index checks, labels/offsets into the destination, stats.
class ReaderBase : public BatchReader {
 public:
  /// `mapped_labels`: when labels are read per batch, map them (the mmap engine) rather than pread.
  explicit ReaderBase(OpenedDataset dataset, bool mapped_labels = false);
  const DatasetInfo& info() const override { return dataset_.info; }
  SharedView<std::int32_t> labels() const override { return SharedView<std::int32_t>::borrow(dataset_.labels); }
  SharedView<std::int64_t> lengths() const override { return SharedView<std::int64_t>::borrow(dataset_.lengths); }
  void read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) override;
  std::int64_t samples_bytes(const std::int64_t* indices, std::int64_t count) const override;
  void read(const std::int64_t* indices, std::int64_t count, const BatchDestination& destination) final;
  ReadStats stats() const override { return stats_; }

 protected:
  /// Elements before row `row` in the data dataset (fixed: row * row_elements; sequences: offsets[row]).
  std::int64_t first_element(std::int64_t row) const {
    return dataset_.info.variable_length ? dataset_.offsets[row] : row * dataset_.row_elements;
  }
  std::int64_t row_elements(std::int64_t row) const {
    return dataset_.info.variable_length ? dataset_.lengths[row] : dataset_.row_elements;
  }
  /// A run of adjacent rows: its first and last row, first element and elements in the data dataset.
  struct RunSpan {
    std::int64_t first_row, last_row, first_element, elements;
  };
  RunSpan run_span(const BatchPlan& plan, const BatchPlan::Run& run) const {
    const std::int64_t first_row = plan.unique_rows[run.first_slot];
    const std::int64_t last_row = plan.unique_rows[run.first_slot + run.slots - 1];
    const std::int64_t begin = first_element(first_row);
    return {first_row, last_row, begin, first_element(last_row) + row_elements(last_row) - begin};
  }
  std::int64_t element_size() const { return static_cast<std::int64_t>(element_bytes(dataset_.info.element_type)); }
  const ShardLayout& shard(std::size_t index) const { return dataset_.shards[index]; }
  /// "rows 5..9 of data.h5" for the error of a read of global rows first..last in `shard` (rows
  /// counted in that file).
  std::string describe_rows(std::size_t shard, std::int64_t first, std::int64_t last) const;
  /// Copies the samples of indices[0..count) to out, row k at out + out_offsets[k] (bytes; count+1
  /// entries). Indices are valid; adds to stats_.bytes_read and read_calls. `labels` is non-null
  /// only for an engine whose gathers_labels() is true and when labels are wanted: then label k goes
  /// to labels[k], taken from row_labels().
  virtual void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
                      const std::vector<std::int64_t>& out_offsets, std::int32_t* labels) = 0;
  /// True for an engine that copies each row's label with the row (where labels can be mapped or
  /// are in memory): read() then leaves the labels to gather().
  virtual bool gathers_labels() const { return false; }
  /// Where the labels lie for gather(): in memory, or mapped (per-batch labels of the mmap engine).
  /// Only when labels are held or mapped.
  RowLabels row_labels() const;
  /// Copies unique rows from `scratch` (plan order, back to back) to their batch positions.
  void scatter(const BatchPlan& plan, const std::byte* scratch, std::byte* out,
               const std::vector<std::int64_t>& out_offsets) const;

  OpenedDataset dataset_;
  ShardIndex shard_index_;                     // row -> shard
  std::unique_ptr<BatchLabels> batch_labels_;  // when dataset_.labels_per_batch
  ReadStats stats_;
  std::vector<std::int64_t> out_offsets_;  // reused between batches
};

std::unique_ptr<BatchReader> make_hdf5_reader(OpenedDataset dataset, int max_open_files, int copy_threads);
/// `odirect`: read with O_DIRECT (ReaderOptions::odirect); a file system that refuses it is a UsageError.
std::unique_ptr<BatchReader> make_direct_reader(OpenedDataset dataset, int copy_threads, int max_open_files,
                                                bool odirect);
std::unique_ptr<BatchReader> make_mmap_reader(OpenedDataset dataset, int copy_threads);

}  // namespace strider::io_detail
