// The `hdf5` engine: every layout (contiguous, chunked, compressed, compact, any byte order).
// Rows are sorted, deduplicated and coalesced into runs; the runs of one shard become hyperslab
// selections of at most kMaxBlocksPerRead blocks each (HDF5 1.10.8 builds OR-unions in superlinear
// time, DESIGN.md 4), one H5Dread per selection into scratch, then the rows are scattered back into
// batch order (fixed-size rows already in file order, each once, are read straight into the
// batch). In a chunked dataset a selection is only ever cut between chunks, so each chunk a batch
// touches is read (and decompressed) once per batch, by one H5Dread. Each shard is opened on its
// own with HDF5's default (sec2) driver when a batch first needs it. Fixed-size rows (chunks of whole
// rows) and flat tokens compressed with deflate (after an optional shuffle) bypass HDF5's filters: each
// chunk a read needs is read raw (H5Dread_chunk) and inflated by strider, a whole chunk straight
// into its place, a part through a one-chunk cache that the next read may reuse (chunk_inflate.hpp).
#include <algorithm>
#include <cstring>

#include "io/chunk_inflate.hpp"
#include "io/owner_thread.hpp"
#include "io/reader_detail.hpp"
#include "io/vlen_sequences.hpp"
#include "strider/core/log.hpp"

namespace strider::io_detail {
namespace {

/// Blocks per hyperslab union (one H5Dread each): 8-32 read fastest on HDF5 1.10.8 (docs/guide/your-data.md).
constexpr std::int64_t kMaxBlocksPerRead = 16;

/// One open shard: its file, its data dataset and that dataset's file space.
struct OpenShard {
  OpenShard() = default;
  OpenShard(const OpenShard&) = delete;
  OpenShard& operator=(const OpenShard&) = delete;
  ~OpenShard() {
    // The file and the data dataset are this shard's only open objects in the file. Anything else
    // still open would keep the file open after it is closed here (a leak): say so.
    if (!file) return;
    const ssize_t open_objects = H5Fget_obj_count(file.get(), H5F_OBJ_ALL | H5F_OBJ_LOCAL);
    if (open_objects != 2)
      log_warn("closing ", path, " with ", open_objects, " HDF5 objects open in it (expected 2: the file and ", key,
               ")");
  }
  std::string path, key;
  H5File file;
  H5Dataset data;
  H5Dataspace space;
};

std::unique_ptr<OpenShard> open_shard(const ShardLayout& shard) {
  auto opened = std::make_unique<OpenShard>();
  opened->path = shard.path;
  opened->key = shard.data_key;
  opened->file.reset(
      STRIDER_H5_CHECK(H5Fopen(shard.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "opening " + shard.path));
  H5PropertyList access(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS), "creating a dataset access property list"));
  if (shard.chunk_rows > 0 && !shard.compressed) {
    // Without a chunk cache HDF5 reads only the selected rows of an unfiltered chunk; with one it
    // reads whole chunks (a 64 KiB chunk for one 256-byte row).
    STRIDER_H5_CHECK(H5Pset_chunk_cache(access.get(), 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT),
                     "switching the chunk cache off");
  }
  opened->data.reset(STRIDER_H5_CHECK(H5Dopen2(opened->file.get(), shard.data_key.c_str(), access.get()),
                                      "opening " + shard.data_key + " of " + shard.path));
  opened->space.reset(STRIDER_H5_CHECK(H5Dget_space(opened->data.get()), "getting the dataspace of " + shard.data_key));
  return opened;
}

class Hdf5Reader final : public ReaderBase {
 public:
  Hdf5Reader(OpenedDataset dataset, int max_open_files, int copy_threads)
      : ReaderBase(std::move(dataset)),
        open_(dataset_.shards.size(), max_open_files,
              [this](std::size_t shard) { return open_shard(dataset_.shards[shard]); }),
        pool_(copy_threads) {
    memory_type_ = native_hdf5_type(dataset_.info.element_type);
    start_.assign(dataset_.dims.size(), 0);
    count_.assign(dataset_.dims.begin(), dataset_.dims.end());
    for (const ShardLayout& shard : dataset_.shards)
      if (shard.vlen && !vlen_) vlen_ = std::make_unique<VlenDescriptors>(dataset_.info.element_type);
    if (dataset_.shards.size() == 1) open_.get(0);  // one file: opened at open, as it will be read
    const auto inflated = std::count_if(dataset_.shards.begin(), dataset_.shards.end(),
                                        [](const ShardLayout& shard) { return shard.deflate_filter >= 0; });
    if (inflated > 0)
      log_debug("hdf5 engine: the chunks of ", inflated, " of ", dataset_.shards.size(),
                " shards are read raw and inflated with ", ChunkInflater::library());
  }
  std::string engine() const override { return "hdf5"; }

 protected:
  void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
              const std::vector<std::int64_t>& out_offsets, std::int32_t* /*labels: read() fills them*/) override {
    owner_.check(dataset_.path);
    plan_.build(indices, count, shard_index_);
    const std::int64_t size = element_size();
    // Fixed-size rows in file order, each once (the store's load, --lookahead's windows, reads in
    // order): the scratch would hold exactly the batch, so HDF5 reads straight into `out`.
    const bool in_place = !dataset_.info.variable_length && plan_.in_file_order();
    if (!in_place) {
      std::int64_t unique_elements = 0;
      for (std::int64_t row : plan_.unique_rows) unique_elements += row_elements(row);
      if (static_cast<std::int64_t>(scratch_.size()) < unique_elements * size)
        scratch_.resize(static_cast<std::size_t>(unique_elements * size));
    }
    std::byte* const target = in_place ? out : scratch_.data();

    std::int64_t done_elements = 0;  // elements already in scratch
    std::size_t run = 0;
    while (run < plan_.runs.size()) {
      // One group: runs of one shard, cut only between chunks once it has kMaxBlocksPerRead blocks.
      const std::size_t shard_index = plan_.runs[run].shard;
      const ShardLayout& file = shard(shard_index);
      OpenShard& opened = open_.get(shard_index);
      if (file.deflate_filter >= 0) {
        done_elements += inflate_runs(shard_index, opened, run, target + done_elements * size);
        continue;
      }
      std::int64_t blocks = 0, group_elements = 0, group_rows = 0, touched_chunks = 0;
      std::int64_t last_chunk = -1;
      const std::size_t group_first_run = run;
      for (; run < plan_.runs.size() && plan_.runs[run].shard == shard_index; ++run) {
        const RunSpan span = run_span(plan_, plan_.runs[run]);
        const std::int64_t begin = file_position(file, span);
        const std::int64_t elements = span.elements;
        const std::int64_t extent = file.vlen ? span.last_row - span.first_row + 1 : block_extent(elements);
        const std::int64_t first_chunk = chunk_of(file, begin);
        if (blocks >= kMaxBlocksPerRead && (file.chunk_rows == 0 || first_chunk != last_chunk)) break;
        if (elements == 0) continue;  // empty sequences
        select_block(opened.space.get(), begin, extent, blocks == 0 ? H5S_SELECT_SET : H5S_SELECT_OR);
        ++blocks;
        group_elements += elements;
        group_rows += extent;
        if (file.chunk_rows > 0) {
          const std::int64_t end_chunk = chunk_of(file, begin + extent - 1);
          touched_chunks += end_chunk - std::max(first_chunk, last_chunk + 1) + 1;
          last_chunk = end_chunk;
        }
      }
      if (blocks == 0) continue;
      if (file.vlen) {
        read_vlen_group(opened, group_rows, group_elements, target + done_elements * size,
                        file.data_key + " " + describe_group(group_first_run, run));
      } else {
        read_selection(opened, block_extent(group_elements), target + done_elements * size,
                       [&] { return file.data_key + " " + describe_group(group_first_run, run); });
      }
      done_elements += group_elements;
      stats_.read_calls += 1;
      stats_.bytes_read += file.compressed && file.chunk_rows > 0
                               ? touched_chunks * file.chunks_across_row * file.average_chunk_storage_bytes
                               : group_elements * size;
    }
    if (!in_place) scatter(plan_, scratch_.data(), out, out_offsets);
  }

 private:
  /// Extent along dimension 0 of a block of `elements` elements.
  std::int64_t block_extent(std::int64_t elements) const {
    return dataset_.info.variable_length ? elements : elements / dataset_.row_elements;
  }
  /// Reads what is selected in `opened`'s file space, `positions` along dimension 0 (rows or tokens),
  /// into `out` through a memory space of the file's shape ([positions, ...]): for a single block
  /// HDF5 then maps whole chunks at once, where a flat one makes it map element by element (a third
  /// of the time of a large contiguous read went there). what(): the read's description, for an error.
  template <typename What>
  void read_selection(const OpenShard& opened, std::int64_t positions, std::byte* out, What&& what) {
    std::vector<hsize_t> shape(count_.begin(), count_.end());  // a flat [T] for tokens + offsets
    shape[0] = static_cast<hsize_t>(positions);
    H5Dataspace memory_space(STRIDER_H5_CHECK(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr),
                                              "creating a memory space"));
    STRIDER_H5_CHECK(H5Dread(opened.data.get(), memory_type_, memory_space.get(), opened.space.get(), H5P_DEFAULT, out),
                     "reading " + what());
  }
  /// Where a run starts along dimension 0 of its file: its first row (fixed size, vlen sequences) or
  /// its first token (tokens + offsets).
  std::int64_t file_position(const ShardLayout& file, const RunSpan& span) const {
    const bool by_token = dataset_.info.variable_length && !file.vlen;
    return by_token ? span.first_element - file.first_element : span.first_row - file.first_row;
  }
  static std::int64_t chunk_of(const ShardLayout& file, std::int64_t position) {
    return file.chunk_rows > 0 ? position / file.chunk_rows : 0;
  }

  /// One chunk a read needs: where it is decoded (a place in the batch when one piece takes it whole,
  /// else a buffer of its own; chunk_ when it is the chunk kept from the read before) and its stored
  /// bytes once read. Slots are reused from one read to the next.
  struct ChunkJob {
    std::int64_t chunk = -1, count = 0;  // its index in the file and the positions it holds there
    std::byte* destination = nullptr;
    bool kept = false, decoded = false;  // kept: chunk_ holds it; decoded: nothing left to inflate
    std::vector<std::byte> raw, buffer, unshuffled;
    hsize_t stored = 0;
    std::uint32_t skipped = 0;  // bit i: filter i was not applied to this chunk
    std::unique_ptr<ChunkInflater> inflater;
  };
  /// A run's part within one chunk: `positions` from `offset` in chunk `job`'s positions, to `out`.
  struct Piece {
    std::size_t job;
    std::int64_t offset, positions, out;  // out: bytes into the target
  };

  /// The rows of runs [run, ...) of shard `shard_index` (up to its last run; `run` is left past it),
  /// whose chunks this engine inflates, in order into `target`; returns the elements written. Chunks
  /// run along dimension 0: rows, or tokens of a tokens + offsets dataset. The chunks are taken in
  /// groups of at most twice the copy threads: read raw one after the other (HDF5 is this thread's),
  /// then inflated at once on the copy threads, a chunk wanted whole straight into its place, any
  /// other into a buffer its pieces are copied from. The last chunk decoded into a buffer is kept
  /// for the next read (chunk_).
  std::int64_t inflate_runs(std::size_t shard_index, OpenShard& opened, std::size_t& run, std::byte* target) {
    const ShardLayout& file = shard(shard_index);
    const bool by_token = dataset_.info.variable_length;  // vlen shards never get here
    const std::int64_t position_bytes = (by_token ? 1 : dataset_.row_elements) * element_size();
    const std::int64_t positions = by_token ? file.elements : file.rows;
    const std::int64_t chunk_rows = file.chunk_rows, chunk_bytes = chunk_rows * position_bytes;
    const std::size_t group = 2 * static_cast<std::size_t>(pool_.threads());
    if (jobs_.size() < group) jobs_.resize(group);
    std::int64_t written = 0;  // bytes
    std::size_t jobs = 0;
    pieces_.clear();
    const auto flush = [&] {  // decodes jobs [0, jobs) and copies pieces_ out of them
      decode_group(opened, file, jobs, chunk_bytes);
      for (const Piece& piece : pieces_) {
        const ChunkJob& job = jobs_[piece.job];
        if (job.destination == target + piece.out) continue;  // inflated in place
        std::memcpy(target + piece.out, job.destination + piece.offset * position_bytes,
                    static_cast<std::size_t>(piece.positions * position_bytes));
      }
      // Keep the last chunk that went to a buffer of its own for the next read.
      for (std::size_t j = jobs; j-- > 0;) {
        ChunkJob& job = jobs_[j];
        if (job.kept) break;
        if (job.destination != job.buffer.data()) continue;
        std::swap(chunk_, job.buffer);
        chunk_shard_ = shard_index;
        chunk_index_ = job.chunk;
        break;
      }
      jobs = 0;
      pieces_.clear();
    };
    for (; run < plan_.runs.size() && plan_.runs[run].shard == shard_index; ++run) {
      const RunSpan span = run_span(plan_, plan_.runs[run]);
      const std::int64_t begin = file_position(file, span);
      const std::int64_t end = begin + (by_token ? span.elements : span.last_row - span.first_row + 1);
      for (std::int64_t at = begin; at < end;) {
        const std::int64_t chunk = at / chunk_rows, chunk_first = chunk * chunk_rows;
        const std::int64_t chunk_end = std::min(chunk_first + chunk_rows, positions);
        const std::int64_t until = std::min(end, chunk_end);
        if (jobs == 0 || jobs_[jobs - 1].chunk != chunk) {
          if (jobs == group) flush();
          ChunkJob& job = jobs_[jobs++];
          job.chunk = chunk;
          job.count = chunk_end - chunk_first;
          job.kept = chunk_shard_ == shard_index && chunk_index_ == chunk;
          // Wanted whole (so by this piece alone) and not kept: straight into its place.
          const bool whole = at == chunk_first && until == chunk_first + chunk_rows;
          if (job.kept) {
            job.destination = chunk_.data();
          } else if (whole) {
            job.destination = target + written;
          } else {
            job.buffer.resize(static_cast<std::size_t>(chunk_bytes));
            job.destination = job.buffer.data();
          }
        }
        pieces_.push_back({jobs - 1, at - chunk_first, until - at, written});
        written += (until - at) * position_bytes;
        at = until;
      }
    }
    if (jobs > 0) flush();
    return written / element_size();
  }

  /// Reads jobs_[0, jobs) raw on this thread (or, for a chunk never written, its fill value through
  /// HDF5) and inflates them on the copy threads.
  void decode_group(OpenShard& opened, const ShardLayout& file, std::size_t jobs, std::int64_t chunk_bytes) {
    for (std::size_t j = 0; j < jobs; ++j) {
      ChunkJob& job = jobs_[j];
      job.decoded = job.kept;
      if (!job.kept) read_raw_chunk(opened, file, job, chunk_bytes);
    }
    pool_.run(static_cast<int>(jobs), [&](int j) {
      ChunkJob& job = jobs_[static_cast<std::size_t>(j)];
      if (!job.decoded) inflate_chunk(file, job, chunk_bytes);
    });
  }

  /// "chunk 3 (rows 3072..4095 of data.h5)" or "chunk 3 (tokens 48..63 of /tokens in data.h5)".
  std::string describe_chunk(const ShardLayout& file, const ChunkJob& job) const {
    const std::int64_t first = job.chunk * file.chunk_rows;
    return "chunk " + std::to_string(job.chunk) + " (" +
           (dataset_.info.variable_length
                ? "tokens " + std::to_string(first) + ".." + std::to_string(first + job.count - 1) + " of " +
                      file.data_key + " in " + file.path
                : describe_rows(static_cast<std::size_t>(&file - dataset_.shards.data()), file.first_row + first,
                                file.first_row + first + job.count - 1)) +
           ")";
  }

  /// The stored bytes of `job`'s chunk into job.raw, or, where the chunk was never written, its fill
  /// value read through HDF5 into job.destination (job.decoded).
  void read_raw_chunk(OpenShard& opened, const ShardLayout& file, ChunkJob& job, std::int64_t chunk_bytes) {
    const std::int64_t first = job.chunk * file.chunk_rows;  // in this file
    std::vector<hsize_t> offset(dataset_.dims.size(), 0);
    offset[0] = static_cast<hsize_t>(first);
    job.stored = 0;
    const herr_t sized = H5Dget_chunk_storage_size(opened.data.get(), offset.data(), &job.stored);
    if (sized < 0 || job.stored == 0) {
      H5Eclear2(H5E_DEFAULT);
      select_block(opened.space.get(), first, job.count, H5S_SELECT_SET);
      read_selection(opened, job.count, job.destination, [&] { return describe_chunk(file, job); });
      stats_.read_calls += 1;
      job.decoded = true;
      return;
    }
    // HDF5 stores a chunk that deflate would grow unfiltered (the filter is optional), so no stream is
    // longer than zlib's bound for the chunk; a longer one is a damaged index, not memory to allocate.
    const auto most = static_cast<hsize_t>(chunk_bytes + chunk_bytes / 1024 + 64);
    if (job.stored > most)
      STRIDER_THROW(DataError, "reading " + describe_chunk(file, job) + ": stored in " + std::to_string(job.stored) +
                                   " bytes, more than deflate makes of the chunk's " + std::to_string(chunk_bytes) +
                                   " (is the file damaged?)");
    if (job.raw.size() < job.stored) job.raw.resize(static_cast<std::size_t>(job.stored));
    STRIDER_H5_CHECK(H5Dread_chunk(opened.data.get(), H5P_DEFAULT, offset.data(), &job.skipped, job.raw.data()),
                     "reading " + describe_chunk(file, job));
    stats_.read_calls += 1;
    stats_.bytes_read += static_cast<std::int64_t>(job.stored);
  }

  /// Inflates (and unshuffles) job.raw into job.destination, which has room for the whole chunk.
  /// Touches only the job: safe on any copy thread.
  void inflate_chunk(const ShardLayout& file, ChunkJob& job, std::int64_t chunk_bytes) const {
    const bool deflated = (job.skipped & (1u << file.deflate_filter)) == 0;
    const bool shuffled = file.shuffle_filter >= 0 && (job.skipped & (1u << file.shuffle_filter)) == 0;
    if (shuffled && static_cast<std::int64_t>(job.unshuffled.size()) < chunk_bytes)
      job.unshuffled.resize(static_cast<std::size_t>(chunk_bytes));
    std::byte* const plain = shuffled ? job.unshuffled.data() : job.destination;
    if (deflated) {
      if (!job.inflater) job.inflater = std::make_unique<ChunkInflater>();
      if (!job.inflater->inflate(job.raw.data(), static_cast<std::size_t>(job.stored), plain,
                                 static_cast<std::size_t>(chunk_bytes)))
        STRIDER_THROW(DataError, "reading " + describe_chunk(file, job) + ": its " + std::to_string(job.stored) +
                                     " stored bytes do not inflate to the chunk's " + std::to_string(chunk_bytes) +
                                     " bytes (is the file damaged?)");
    } else {
      if (static_cast<std::int64_t>(job.stored) != chunk_bytes)
        STRIDER_THROW(DataError, "reading " + describe_chunk(file, job) + ": stored uncompressed in " +
                                     std::to_string(job.stored) + " bytes, not the chunk's " +
                                     std::to_string(chunk_bytes) + " (is the file damaged?)");
      std::memcpy(plain, job.raw.data(), static_cast<std::size_t>(chunk_bytes));
    }
    if (shuffled)
      unshuffle(plain, static_cast<std::size_t>(chunk_bytes), static_cast<std::size_t>(element_size()),
                job.destination);
  }

  /// Reads the `rows` vlen sequences selected in `opened` (their tokens: `elements`, as the lengths
  /// read at open say) back to back into `target`; HDF5's buffers are freed before this returns.
  void read_vlen_group(const OpenShard& opened, std::int64_t rows, std::int64_t elements, std::byte* target,
                       const std::string& what) {
    vlen_->read(opened.data.get(), opened.space.get(), rows, what);
    std::int64_t total = 0;
    for (std::int64_t row = 0; row < rows; ++row) total += vlen_->length(row);
    if (total != elements) {
      vlen_->reclaim();
      STRIDER_THROW(DataError, "reading " + what + ": the sequences hold " + std::to_string(total) +
                                   " tokens, not the " + std::to_string(elements) +
                                   " their lengths at open said (was the file changed?)");
    }
    const std::int64_t size = element_size();
    std::int64_t copied = 0;
    for (std::int64_t row = 0; row < rows; ++row) {
      const std::int64_t length = vlen_->length(row);
      if (length > 0) std::memcpy(target + copied * size, vlen_->values(row), static_cast<std::size_t>(length * size));
      copied += length;
    }
    vlen_->reclaim();
  }

  void select_block(hid_t space, std::int64_t begin, std::int64_t extent, H5S_seloper_t op) {
    start_[0] = static_cast<hsize_t>(begin);
    count_[0] = static_cast<hsize_t>(extent);
    STRIDER_H5_CHECK(H5Sselect_hyperslab(space, op, start_.data(), nullptr, count_.data(), nullptr),
                     "selecting elements " + std::to_string(begin) + " of " + dataset_.data_key);
  }

  /// "rows 5..9 of data.h5" for runs [first_run, end_run) of one shard.
  std::string describe_group(std::size_t first_run, std::size_t end_run) const {
    const BatchPlan::Run& last = plan_.runs[end_run - 1];
    return describe_rows(last.shard, plan_.unique_rows[plan_.runs[first_run].first_slot],
                         plan_.unique_rows[last.first_slot + last.slots - 1]);
  }

  OwnerThread owner_;
  ShardHandles<OpenShard> open_;
  hid_t memory_type_ = H5I_INVALID_HID;
  std::vector<hsize_t> start_, count_;
  BatchPlan plan_;
  std::vector<std::byte> scratch_;
  std::unique_ptr<VlenDescriptors> vlen_;  // when a shard holds vlen sequences
  // Chunks inflated by this engine: the copy threads, a group's chunks and pieces, and the chunk kept
  // from the read before (shard and index; -1: none).
  CopyPool pool_;
  std::vector<ChunkJob> jobs_;
  std::vector<Piece> pieces_;
  std::vector<std::byte> chunk_;
  std::size_t chunk_shard_ = 0;
  std::int64_t chunk_index_ = -1;
};

}  // namespace

std::unique_ptr<BatchReader> make_hdf5_reader(OpenedDataset dataset, int max_open_files, int copy_threads) {
  return std::make_unique<Hdf5Reader>(std::move(dataset), max_open_files, copy_threads);
}

}  // namespace strider::io_detail
