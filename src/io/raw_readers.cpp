// The engines that bypass HDF5 in the data path: `direct` (pread of coalesced runs at the dataset's
// file offset) and `mmap` (the file mapped read-only, rows gathered by memcpy). Both need a
// contiguous, unfiltered, allocated dataset whose stored type is the native one (open_reader checks).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "io/reader_detail.hpp"

namespace strider::io_detail {
namespace {

/// Bytes of the whole data dataset, and a check that the file really holds them.
std::int64_t data_bytes_checked(const OpenedDataset& dataset, int descriptor) {
  const std::int64_t elements =
      dataset.info.variable_length ? dataset.info.num_tokens : dataset.info.num_samples * dataset.row_elements;
  const std::int64_t bytes = elements * static_cast<std::int64_t>(element_bytes(dataset.info.element_type));
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) STRIDER_THROW_ERRNO("fstat()", "checking the size of " + dataset.path, errno);
  if (dataset.file_offset_bytes < 0 || dataset.file_offset_bytes + bytes > status.st_size)
    STRIDER_THROW(DataError, "cannot open " + dataset.path + ": " + dataset.data_key + " needs bytes " +
                                 std::to_string(dataset.file_offset_bytes) + ".." +
                                 std::to_string(dataset.file_offset_bytes + bytes) + " but the file has " +
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

class MmapReader final : public ReaderBase {
 public:
  MmapReader(OpenedDataset dataset, int copy_threads) : ReaderBase(std::move(dataset), true), pool_(copy_threads) {
    FileDescriptor file(dataset_.path);
    mapping_ =
        std::make_unique<FileMapping>(file.get(), dataset_.file_offset_bytes, data_bytes_checked(dataset_, file.get()),
                                      dataset_.data_key + " of " + dataset_.path);
    data_ = mapping_->data();
  }
  std::string engine() const override { return "mmap"; }

 protected:
  void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
              const std::vector<std::int64_t>& out_offsets) override {
    const std::int64_t size = element_size();
    const int parts = parts_for(out_offsets[count], pool_.threads());
    pool_.run(parts, [&](int part) {
      const std::int64_t end = part_begin(count, parts, part + 1);
      const std::int64_t begin = part_begin(count, parts, part);
      for (std::int64_t k = begin; k < std::min(end, begin + kRowsAhead); ++k)
        prefetch_row(indices[k], out_offsets[k + 1] - out_offsets[k]);
      for (std::int64_t k = begin; k < end; ++k) {
        if (k + kRowsAhead < end)
          prefetch_row(indices[k + kRowsAhead], out_offsets[k + kRowsAhead + 1] - out_offsets[k + kRowsAhead]);
        const std::int64_t bytes = out_offsets[k + 1] - out_offsets[k];
        if (bytes > 0)
          std::memcpy(out + out_offsets[k], data_ + first_element(indices[k]) * size, static_cast<std::size_t>(bytes));
      }
    });
    stats_.bytes_read += out_offsets[count];
    stats_.read_calls += count;
  }

 private:
  /// Shuffled rows are random memory accesses, each a cache miss: asking for the rows kRowsAhead
  /// positions ahead keeps several misses in flight while one row is copied. The distance matters
  /// little within a few rows either way of it.
  static constexpr std::int64_t kRowsAhead = 8;
  /// Prefetches the first KiB of a row; the hardware prefetcher follows longer rows on its own.
  void prefetch_row(std::int64_t row, std::int64_t bytes) const noexcept {
    const std::byte* at = data_ + first_element(row) * element_size();
    for (std::int64_t line = 0; line < std::min<std::int64_t>(bytes, 1024); line += 64)
      __builtin_prefetch(at + line, 0, 0);
  }
  CopyPool pool_;
  std::unique_ptr<FileMapping> mapping_;
  const std::byte* data_ = nullptr;  // the first element of the data
};

class DirectReader final : public ReaderBase {
 public:
  DirectReader(OpenedDataset dataset, int copy_threads)
      : ReaderBase(std::move(dataset)), file_(dataset_.path), pool_(copy_threads) {
    data_bytes_checked(dataset_, file_.get());
  }
  std::string engine() const override { return "direct"; }

 protected:
  void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
              const std::vector<std::int64_t>& out_offsets) override {
    plan_.build(indices, count);
    const std::int64_t size = element_size();
    const std::size_t slots = plan_.unique_rows.size();
    // A row alone in its run is read straight into the first batch position that wants it; longer
    // runs go through scratch, one pread each.
    first_position_.assign(slots, -1);
    for (std::int64_t k = 0; k < count; ++k) {
      std::int64_t& first = first_position_[plan_.slot_of_position[k]];
      if (first < 0) first = k;
    }
    source_.assign(slots, nullptr);
    spans_.clear();
    std::int64_t scratch_bytes = 0, bytes_read = 0;
    for (const BatchPlan::Run& run : plan_.runs) {
      spans_.push_back(run_span(plan_, run));
      bytes_read += spans_.back().elements * size;
      if (run.slots > 1) scratch_bytes += spans_.back().elements * size;
    }
    if (static_cast<std::int64_t>(scratch_.size()) < scratch_bytes)
      scratch_.resize(static_cast<std::size_t>(scratch_bytes));
    targets_.resize(plan_.runs.size());
    std::int64_t scratch_offset = 0;
    for (std::size_t r = 0; r < plan_.runs.size(); ++r) {
      const BatchPlan::Run& run = plan_.runs[r];
      if (run.slots == 1) {
        targets_[r] = out + out_offsets[first_position_[run.first_slot]];
        source_[run.first_slot] = targets_[r];
      } else {
        targets_[r] = scratch_.data() + scratch_offset;
        for (std::int64_t slot = run.first_slot; slot < run.first_slot + run.slots; ++slot)
          source_[slot] = targets_[r] + (first_element(plan_.unique_rows[slot]) - spans_[r].first_element) * size;
        scratch_offset += spans_[r].elements * size;
      }
    }
    const auto runs = static_cast<std::int64_t>(plan_.runs.size());
    const int parts = parts_for(out_offsets[count], pool_.threads());
    pool_.run(parts, [&](int part) {
      const std::int64_t end = part_begin(runs, parts, part + 1);
      for (std::int64_t r = part_begin(runs, parts, part); r < end; ++r) {
        const RunSpan& span = spans_[r];
        read_fully(targets_[r], span.elements * size, dataset_.file_offset_bytes + span.first_element * size,
                   span.first_row, span.last_row);
      }
    });
    for (std::int64_t k = 0; k < count; ++k) {
      const std::byte* from = source_[plan_.slot_of_position[k]];
      const std::int64_t bytes = out_offsets[k + 1] - out_offsets[k];
      if (from != out + out_offsets[k] && bytes > 0)
        std::memcpy(out + out_offsets[k], from, static_cast<std::size_t>(bytes));
    }
    stats_.bytes_read += bytes_read;
    stats_.read_calls += runs;
  }

 private:
  void read_fully(std::byte* target, std::int64_t bytes, std::int64_t offset, std::int64_t first_row,
                  std::int64_t last_row) {
    pread_exactly(file_.get(), target, bytes, offset, [&] {
      return dataset_.data_key + " rows " + std::to_string(first_row) + ".." + std::to_string(last_row) + " of " +
             dataset_.path;
    });
  }

  FileDescriptor file_;
  CopyPool pool_;
  BatchPlan plan_;
  std::vector<std::int64_t> first_position_;
  std::vector<const std::byte*> source_;
  std::vector<RunSpan> spans_;
  std::vector<std::byte*> targets_;
  std::vector<std::byte> scratch_;
};

}  // namespace

std::unique_ptr<BatchReader> make_direct_reader(OpenedDataset dataset, int copy_threads) {
  return std::make_unique<DirectReader>(std::move(dataset), copy_threads);
}

std::unique_ptr<BatchReader> make_mmap_reader(OpenedDataset dataset, int copy_threads) {
  return std::make_unique<MmapReader>(std::move(dataset), copy_threads);
}

}  // namespace strider::io_detail
