// The engines that bypass HDF5 in the data path: `direct` (pread of coalesced runs at the dataset's
// file offset, optionally with O_DIRECT) and `mmap` (the file mapped read-only, rows gathered by
// memcpy). Both need a contiguous, unfiltered, allocated dataset whose stored type is the native one
// (open_reader checks), and read every shard on its own: direct keeps at most max_open_files
// descriptors, mmap maps each shard it reads (a single file at open) and closes its descriptor at once.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "io/reader_detail.hpp"
#include "io/row_gather.hpp"

namespace strider::io_detail {
namespace {

/// Bytes of a shard's data dataset, and a check that its file really holds them.
std::int64_t data_bytes_checked(const ShardLayout& shard, ElementType type, int descriptor) {
  const std::int64_t bytes = shard.elements * static_cast<std::int64_t>(element_bytes(type));
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) STRIDER_THROW_ERRNO("fstat()", "checking the size of " + shard.path, errno);
  if (shard.file_offset_bytes < 0 || shard.file_offset_bytes + bytes > status.st_size)
    STRIDER_THROW(DataError, "cannot open " + shard.path + ": " + shard.data_key + " needs bytes " +
                                 std::to_string(shard.file_offset_bytes) + ".." +
                                 std::to_string(shard.file_offset_bytes + bytes) + " but the file has " +
                                 std::to_string(status.st_size) + " (truncated?)");
  return bytes;
}

/// Splits [0, count) into `parts` nearly equal ranges; part p is [begin(p), begin(p+1)).
std::int64_t part_begin(std::int64_t count, int parts, int part) {
  return count * part / parts;
}

/// Parts worth using for `bytes` of copying: a thread per 256 KiB at most.
int parts_for(std::int64_t bytes, int threads) {
  const std::int64_t by_size = bytes / (256 * 1024);
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, by_size)));
}

std::int64_t align_down(std::int64_t value) {
  return value / kDirectIoAlignmentBytes * kDirectIoAlignmentBytes;
}
std::int64_t align_up(std::int64_t value) {
  return align_down(value + kDirectIoAlignmentBytes - 1);
}
bool is_aligned(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % static_cast<std::uintptr_t>(kDirectIoAlignmentBytes) == 0;
}

/// Where part `part` of `parts` begins in `total` bytes of reads laid end to end (read r from
/// starts[r]): at its share of the bytes, moved back to a 4 KiB boundary of the read it falls in
/// (O_DIRECT's alignment, in the file and in memory, as each read is). Part `parts` ends at `total`.
std::int64_t part_cut(const std::vector<std::int64_t>& starts, std::int64_t total, int parts, int part) {
  if (part >= parts) return total;
  const std::int64_t share = total / parts * part + total % parts * part / parts;
  const std::int64_t start = *(std::upper_bound(starts.begin(), starts.end(), share) - 1);
  return start + align_down(share - start);
}

/// Memory aligned for O_DIRECT reads, grown on demand (the contents are not kept when it grows).
class AlignedScratch {
 public:
  /// At least `bytes` of aligned memory.
  std::byte* reserve(std::int64_t bytes) {
    if (bytes > capacity_) {
      const std::int64_t rounded = align_up(bytes);
      void* memory =
          std::aligned_alloc(static_cast<std::size_t>(kDirectIoAlignmentBytes), static_cast<std::size_t>(rounded));
      if (memory == nullptr)
        STRIDER_THROW(SystemError,
                      "cannot allocate " + std::to_string(rounded) + " bytes of aligned memory for O_DIRECT reads");
      data_.reset(static_cast<std::byte*>(memory));
      capacity_ = rounded;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(std::byte* memory) const noexcept { std::free(memory); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::int64_t capacity_ = 0;
};

/// The one line for a file system that will not do O_DIRECT.
[[noreturn]] void refuse_odirect(const std::string& path, const std::string& call, int error_number) {
  STRIDER_THROW(UsageError, "--odirect: the file system of " + path + " refuses O_DIRECT (" + call + ": " +
                                std::strerror(error_number) +
                                "); read it without --odirect or from another file system");
}

class MmapReader final : public ReaderBase {
 public:
  MmapReader(OpenedDataset dataset, int copy_threads)
      : ReaderBase(std::move(dataset), true), pool_(copy_threads), mappings_(dataset_.shards.size()) {
    if (dataset_.shards.size() == 1) map(0);  // one file: mapped at open, as it will be read
    // One file of fixed-size rows starting at its element 0: row r lies at r * row bytes.
    if (dataset_.shards.size() == 1 && !dataset_.info.variable_length && shard(0).first_element == 0) {
      const std::int64_t row_bytes = dataset_.row_elements * element_size();
      fixed_rows_ = fixed_rows_gather(row_bytes, false);
      fixed_rows_labels_ = fixed_rows_gather(row_bytes, true);
    }
  }
  std::string engine() const override { return "mmap"; }

 protected:
  void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
              const std::vector<std::int64_t>& out_offsets, std::int32_t* labels) override {
    const int parts = parts_for(out_offsets[count], pool_.threads());
    const RowLabels row_label = labels != nullptr ? row_labels() : RowLabels{};
    // The fast path: one file of rows of a specialised size, labels (if wanted) stored as int32.
    const FixedRowsGather fixed = labels == nullptr ? fixed_rows_ : row_label.int32 ? fixed_rows_labels_ : nullptr;
    if (fixed != nullptr) {
      const std::byte* rows = mappings_[0]->data();
      pool_.run(parts, [&](int part) {
        fixed(rows, row_label.first, indices, part_begin(count, parts, part), part_begin(count, parts, part + 1), out,
              labels);
      });
      stats_.bytes_read += out_offsets[count];
      stats_.read_calls += count;
      return;
    }
    const std::int64_t size = element_size();
    // Where each row lies, its shard mapped first if need be (on this thread: the mapping is not
    // thread-safe, the copies below are).
    sources_.resize(static_cast<std::size_t>(count));
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t row = indices[k];
      const std::size_t shard_index = shard_index_.shard_of(row);
      const std::byte* base = mappings_[shard_index] ? mappings_[shard_index]->data() : map(shard_index);
      sources_[k] = base + (first_element(row) - shard(shard_index).first_element) * size;
    }
    pool_.run(parts, [&](int part) {
      const std::int64_t begin = part_begin(count, parts, part);
      const std::int64_t end = part_begin(count, parts, part + 1);
      // Each row and its label (when `labels` is set) in one pass; the row and the label
      // kRowsAhead positions ahead are prefetched meanwhile.
      const auto prefetch = [&](std::int64_t k) __attribute__((always_inline)) {
        // The row's first KiB, as for fixed-size rows: with the lines kept in every cache level
        // (prefetch_row), requesting all of w3's sequences (about 300 bytes each) copies them 1.2x
        // as fast as requesting their first line only.
        const std::int64_t bytes = out_offsets[k + 1] - out_offsets[k];
        prefetch_row(sources_[k], bytes);
        if (labels != nullptr) __builtin_prefetch(row_label.address(indices[k]), 0, 3);
      };
      for (std::int64_t k = begin; k < std::min(end, begin + kRowsAhead); ++k) prefetch(k);
      for (std::int64_t k = begin; k < end; ++k) {
        if (k + kRowsAhead < end) prefetch(k + kRowsAhead);
        const std::int64_t bytes = out_offsets[k + 1] - out_offsets[k];
        if (bytes > 0) std::memcpy(out + out_offsets[k], sources_[k], static_cast<std::size_t>(bytes));
        if (labels != nullptr) labels[k] = row_label(indices[k]);
      }
    });
    stats_.bytes_read += out_offsets[count];
    stats_.read_calls += count;
  }
  bool gathers_labels() const override { return true; }

 private:
  /// Maps a shard's data (the descriptor is closed again: a mapping holds no open file); returns its
  /// first element.
  const std::byte* map(std::size_t shard_index) {
    const ShardLayout& file = shard(shard_index);
    FileDescriptor descriptor(file.path);
    mappings_[shard_index] = std::make_unique<FileMapping>(
        descriptor.get(), file.file_offset_bytes,
        data_bytes_checked(file, dataset_.info.element_type, descriptor.get()), file.data_key + " of " + file.path);
    return mappings_[shard_index]->data();
  }
  CopyPool pool_;
  std::vector<std::unique_ptr<FileMapping>> mappings_;  // per shard, once read
  std::vector<const std::byte*> sources_;               // per batch position: its row in a mapping
  FixedRowsGather fixed_rows_ = nullptr;                // the fast path, when the dataset allows it
  FixedRowsGather fixed_rows_labels_ = nullptr;         // the same, copying int32 labels too
};

class DirectReader final : public ReaderBase {
 public:
  DirectReader(OpenedDataset dataset, int copy_threads, int max_open_files, bool odirect)
      : ReaderBase(std::move(dataset)),
        odirect_(odirect),
        files_(dataset_.shards.size(), max_open_files,
               [this](std::size_t shard_index) {
                 const ShardLayout& file = shard(shard_index);
                 std::unique_ptr<FileDescriptor> descriptor = open_data(file.path, odirect_);
                 const std::int64_t bytes = data_bytes_checked(file, dataset_.info.element_type, descriptor->get());
                 if (odirect_) probe_odirect(file, bytes, descriptor->get());
                 return descriptor;
               }),
        pool_(copy_threads) {
    if (dataset_.shards.size() == 1) files_.get(0);  // one file: opened at open, as it will be read
  }
  std::string engine() const override { return "direct"; }

 protected:
  void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
              const std::vector<std::int64_t>& out_offsets, std::int32_t* /*labels: read() fills them*/) override {
    plan_.build(indices, count, shard_index_);
    const std::int64_t size = element_size();
    const std::size_t slots = plan_.unique_rows.size();
    // A row alone in its run is read straight into the first batch position that wants it (with
    // O_DIRECT only where that read is aligned in the file and in memory); the other runs go through
    // scratch, one pread each.
    first_position_.assign(slots, -1);
    for (std::int64_t k = 0; k < count; ++k) {
      std::int64_t& first = first_position_[plan_.slot_of_position[k]];
      if (first < 0) first = k;
    }
    source_.assign(slots, nullptr);
    reads_.clear();
    std::int64_t scratch_bytes = 0, bytes_read = 0;
    for (const BatchPlan::Run& run : plan_.runs) {
      Read read;
      read.span = run_span(plan_, run);
      read.shard = run.shard;
      const ShardLayout& file = shard(run.shard);
      read.begin = file.file_offset_bytes + (read.span.first_element - file.first_element) * size;
      read.bytes = read.span.elements * size;
      read.read_begin = odirect_ ? align_down(read.begin) : read.begin;
      read.read_bytes = (odirect_ ? align_up(read.begin + read.bytes) : read.begin + read.bytes) - read.read_begin;
      std::byte* batch_target = run.slots == 1 ? out + out_offsets[first_position_[run.first_slot]] : nullptr;
      const bool straight =
          batch_target != nullptr &&
          (!odirect_ || (read.read_begin == read.begin && read.read_bytes == read.bytes && is_aligned(batch_target)));
      read.target = straight ? batch_target : nullptr;
      read.scratch_offset = straight ? -1 : scratch_bytes;
      if (!straight) scratch_bytes += read.read_bytes;
      bytes_read += read.read_bytes;
      reads_.push_back(read);
    }
    std::byte* scratch = odirect_ ? aligned_scratch_.reserve(scratch_bytes) : plain_scratch(scratch_bytes);
    for (std::size_t r = 0; r < plan_.runs.size(); ++r) {
      const BatchPlan::Run& run = plan_.runs[r];
      Read& read = reads_[r];
      if (read.target == nullptr) read.target = scratch + read.scratch_offset;
      // The run's first row starts (begin - read_begin) bytes into what is read.
      const std::byte* first_row = read.target + (read.begin - read.read_begin);
      for (std::int64_t slot = run.first_slot; slot < run.first_slot + run.slots; ++slot)
        source_[slot] = first_row + (first_element(plan_.unique_rows[slot]) - read.span.first_element) * size;
    }
    // The runs in groups of at most max_open_files shards (runs come in shard order): a group's
    // files are all open while its runs are read in parallel.
    const auto runs = static_cast<std::int64_t>(plan_.runs.size());
    std::int64_t group_begin = 0, read_calls = 0;
    while (group_begin < runs) {
      std::int64_t group_end = group_begin;
      std::size_t shards_in_group = 0;
      for (; group_end < runs; ++group_end) {
        const bool new_shard =
            group_end == group_begin || plan_.runs[group_end].shard != plan_.runs[group_end - 1].shard;
        if (new_shard && shards_in_group == files_.bound()) break;
        if (new_shard) ++shards_in_group;
        reads_[group_end].descriptor = files_.get(plan_.runs[group_end].shard).get();
      }
      // Parts of equal bytes rather than of equal runs: one large run (a batch of one 2.8 MB
      // sample) is read by every copy thread, a piece each, so that a rank keeps as many reads in
      // flight as it has copy threads, as fio does with as many jobs.
      std::int64_t group_bytes = 0;
      starts_.clear();
      for (std::int64_t r = group_begin; r < group_end; ++r) {
        starts_.push_back(group_bytes);
        group_bytes += reads_[r].read_bytes;
      }
      const int parts = parts_for(group_bytes, pool_.threads());
      part_calls_.assign(static_cast<std::size_t>(parts), 0);
      pool_.run(parts, [&](int part) {
        part_calls_[static_cast<std::size_t>(part)] = read_between(
            group_begin, part_cut(starts_, group_bytes, parts, part), part_cut(starts_, group_bytes, parts, part + 1));
      });
      for (const std::int64_t calls : part_calls_) read_calls += calls;
      group_begin = group_end;
    }
    for (std::int64_t k = 0; k < count; ++k) {
      const std::byte* from = source_[plan_.slot_of_position[k]];
      const std::int64_t bytes = out_offsets[k + 1] - out_offsets[k];
      if (from != out + out_offsets[k] && bytes > 0)
        std::memcpy(out + out_offsets[k], from, static_cast<std::size_t>(bytes));
    }
    stats_.bytes_read += bytes_read;
    stats_.read_calls += read_calls;
  }

 private:
  /// One pread: the run's bytes [begin, begin + bytes) of its shard's file, within what is read
  /// [read_begin, read_begin + read_bytes) (the same without O_DIRECT; else widened to alignment).
  struct Read {
    RunSpan span;
    std::size_t shard = 0;
    int descriptor = -1;
    std::int64_t begin = 0, bytes = 0, read_begin = 0, read_bytes = 0;
    std::int64_t scratch_offset = -1;  // where in scratch, or -1: straight into the batch
    std::byte* target = nullptr;
  };

  static std::unique_ptr<FileDescriptor> open_data(const std::string& path, bool odirect) {
    if (!odirect) return std::make_unique<FileDescriptor>(path);
    try {
      return std::make_unique<FileDescriptor>(path, O_DIRECT);
    } catch (const SystemError& error) {
      if (error.context().code == EINVAL) refuse_odirect(path, "open", EINVAL);
      throw;
    }
  }

  /// Some file systems take O_DIRECT at open and refuse the reads: read the data's first block now,
  /// so that the refusal is an error at open (agreed by open_reader) rather than at the first batch.
  /// Its own block: a shard opened mid-batch must not overwrite the scratch that holds earlier runs.
  static void probe_odirect(const ShardLayout& file, std::int64_t data_bytes, int descriptor) {
    if (data_bytes == 0) return;
    AlignedScratch probe;
    std::byte* block = probe.reserve(kDirectIoAlignmentBytes);
    const ssize_t got = ::pread(descriptor, block, static_cast<std::size_t>(kDirectIoAlignmentBytes),
                                align_down(file.file_offset_bytes));
    if (got < 0 && errno == EINVAL) refuse_odirect(file.path, "pread", EINVAL);
    if (got < 0) STRIDER_THROW_ERRNO("pread()", "reading the first block of " + file.path + " with O_DIRECT", errno);
  }

  std::byte* plain_scratch(std::int64_t bytes) {
    if (static_cast<std::int64_t>(scratch_.size()) < bytes) scratch_.resize(static_cast<std::size_t>(bytes));
    return scratch_.data();
  }

  /// Reads the bytes [from, to) of the group's reads laid end to end (read r of the group from
  /// starts_[r]): the pieces of the reads that overlap them, one pread each. Returns the preads.
  std::int64_t read_between(std::int64_t group_begin, std::int64_t from, std::int64_t to) {
    std::int64_t calls = 0;
    if (from >= to) return calls;
    auto r = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), from) - starts_.begin() - 1);
    for (; r < starts_.size() && starts_[r] < to; ++r) {
      const Read& read = reads_[static_cast<std::size_t>(group_begin) + r];
      const std::int64_t begin = std::max(from, starts_[r]) - starts_[r];
      const std::int64_t end = std::min(to, starts_[r] + read.read_bytes) - starts_[r];
      if (end <= begin) continue;
      read_piece(read, begin, end);
      ++calls;
    }
    return calls;
  }

  /// Reads [begin, end) of what a run reads (retried until whole) from its shard's descriptor;
  /// `begin` is a multiple of 4 KiB.
  void read_piece(const Read& read, std::int64_t begin, std::int64_t end) {
    const ShardLayout& file = shard(read.shard);
    const auto describe = [&] {
      return file.data_key + " " + describe_rows(read.shard, read.span.first_row, read.span.last_row) +
             (odirect_ ? " with O_DIRECT" : "");
    };
    if (!odirect_) {
      pread_exactly(read.descriptor, read.target + begin, end - begin, read.begin + begin, describe);
      return;
    }
    // The widened read may pass the end of the file (in its last block): a short read there is
    // fine once the run's own bytes have arrived.
    const std::int64_t needed = std::min(end, read.begin + read.bytes - read.read_begin);
    std::int64_t done = begin;
    while (done < needed) {
      const ssize_t got =
          ::pread(read.descriptor, read.target + done, static_cast<std::size_t>(end - done), read.read_begin + done);
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL) refuse_odirect(file.path, "pread", EINVAL);
        STRIDER_THROW_ERRNO("pread()", "reading " + describe(), errno);
      }
      done += got;
      // A read that ends off the alignment ended at the end of the file: nothing more can come.
      if (got == 0 || (done < needed && done % kDirectIoAlignmentBytes != 0))
        STRIDER_THROW(DataError, "reading " + describe() + ": unexpected end of file");
    }
  }

  bool odirect_;
  ShardHandles<FileDescriptor> files_;
  CopyPool pool_;
  BatchPlan plan_;
  std::vector<std::int64_t> first_position_;
  std::vector<const std::byte*> source_;
  std::vector<Read> reads_;
  std::vector<std::int64_t> starts_;      // per read of a group: where it starts, its reads end to end
  std::vector<std::int64_t> part_calls_;  // per part of a group: its preads
  std::vector<std::byte> scratch_;        // without O_DIRECT
  AlignedScratch aligned_scratch_;        // with O_DIRECT
};

}  // namespace

std::unique_ptr<BatchReader> make_direct_reader(OpenedDataset dataset, int copy_threads, int max_open_files,
                                                bool odirect) {
  return std::make_unique<DirectReader>(std::move(dataset), copy_threads, max_open_files, odirect);
}

std::unique_ptr<BatchReader> make_mmap_reader(OpenedDataset dataset, int copy_threads) {
  return std::make_unique<MmapReader>(std::move(dataset), copy_threads);
}

}  // namespace strider::io_detail
