// The `hdf5` engine: every layout (contiguous, chunked, compressed, compact, any byte order).
// Rows are sorted, deduplicated and coalesced into runs; the runs become hyperslab selections of at
// most kMaxBlocksPerRead blocks each (HDF5 1.10.8 builds OR-unions in superlinear time, DESIGN.md 4),
// one H5Dread per selection into scratch, then the rows are scattered back into batch order.
// In a chunked dataset a selection is only ever cut between chunks, so each chunk a batch touches
// is read (and decompressed) once per batch, by one H5Dread.
#include <algorithm>

#include "io/owner_thread.hpp"
#include "io/reader_detail.hpp"
#include "strider/core/log.hpp"

namespace strider::io_detail {
namespace {

/// Blocks per hyperslab union (one H5Dread each). On 1.10.8, 1M x 64 float32, batches of 256, 2 ranks:
/// 8-32 blocks per read are best (~0.6M samples per CPU-second), 1 block 0.34M, 512 blocks 0.34M.
constexpr std::int64_t kMaxBlocksPerRead = 16;

class Hdf5Reader final : public ReaderBase {
 public:
  Hdf5Reader(OpenedDataset dataset, H5File file, H5Dataset data)
      : ReaderBase(std::move(dataset)), file_(std::move(file)), data_(std::move(data)) {
    file_space_.reset(STRIDER_H5_CHECK(H5Dget_space(data_.get()), "getting the dataspace of " + dataset_.data_key));
    transfer_.reset(STRIDER_H5_CHECK(H5Pcreate(H5P_DATASET_XFER), "creating a transfer property list"));
    STRIDER_H5_CHECK(H5Pset_dxpl_mpio(transfer_.get(), H5FD_MPIO_INDEPENDENT), "selecting independent transfer");
    memory_type_ = native_hdf5_type(dataset_.info.element_type);
    if (!dataset_.info.chunk_shape.empty()) chunk_elements_ = dataset_.info.chunk_shape[0];
    start_.assign(dataset_.dims.size(), 0);
    count_.assign(dataset_.dims.begin(), dataset_.dims.end());
  }
  ~Hdf5Reader() override {
    // The file and the data dataset are this reader's only open objects in the file. Anything else
    // still open would make the MPI-IO file's close fail (and leak the file): say so.
    const ssize_t open_objects = H5Fget_obj_count(file_.get(), H5F_OBJ_ALL | H5F_OBJ_LOCAL);
    if (open_objects != 2)
      log_warn("closing ", dataset_.path, " with ", open_objects, " HDF5 objects open in it (expected 2: the file and ",
               dataset_.data_key, ")");
  }
  std::string engine() const override { return "hdf5"; }

 protected:
  void gather(const std::int64_t* indices, std::int64_t count, std::byte* out,
              const std::vector<std::int64_t>& out_offsets) override {
    owner_.check(dataset_.path);
    plan_.build(indices, count);
    const std::int64_t size = element_size();
    std::int64_t unique_elements = 0;
    for (std::int64_t row : plan_.unique_rows) unique_elements += row_elements(row);
    if (static_cast<std::int64_t>(scratch_.size()) < unique_elements * size)
      scratch_.resize(static_cast<std::size_t>(unique_elements * size));

    std::int64_t done_elements = 0;  // elements already in scratch
    std::int64_t touched_chunks = 0;
    std::int64_t last_chunk = -1;
    std::size_t run = 0;
    while (run < plan_.runs.size()) {
      std::int64_t blocks = 0, group_elements = 0;
      std::int64_t group_last_chunk = -1;
      const std::size_t group_first_run = run;
      for (; run < plan_.runs.size(); ++run) {
        const RunSpan span = run_span(plan_, plan_.runs[run]);
        // Position along dimension 0: the row (fixed size) or the token (sequences).
        const std::int64_t begin = dataset_.info.variable_length ? span.first_element : span.first_row;
        const std::int64_t elements = span.elements;
        const std::int64_t first_chunk = chunk_of(begin);
        // Cut only between chunks so that no chunk is read by two H5Dread calls of one batch.
        if (blocks >= kMaxBlocksPerRead && (chunk_elements_ == 0 || first_chunk != group_last_chunk)) break;
        if (elements == 0) continue;  // an empty sequence
        select_block(begin, elements, blocks == 0 ? H5S_SELECT_SET : H5S_SELECT_OR);
        ++blocks;
        group_elements += elements;
        if (chunk_elements_ > 0) {
          const std::int64_t end_chunk = chunk_of(begin + block_extent(elements) - 1);
          touched_chunks += end_chunk - std::max(first_chunk, last_chunk + 1) + 1;
          last_chunk = group_last_chunk = end_chunk;
        }
      }
      if (blocks == 0) continue;
      const hsize_t memory_elements = static_cast<hsize_t>(group_elements);
      H5Dataspace memory_space(
          STRIDER_H5_CHECK(H5Screate_simple(1, &memory_elements, nullptr), "creating a memory space"));
      STRIDER_H5_CHECK(
          H5Dread(data_.get(), memory_type_, memory_space.get(), file_space_.get(), transfer_.get(),
                  scratch_.data() + done_elements * size),
          "reading " + dataset_.data_key + " rows " + describe_rows(group_first_run, run) + " of " + dataset_.path);
      done_elements += group_elements;
      stats_.read_calls += 1;
    }
    scatter(plan_, scratch_.data(), out, out_offsets);
    if (dataset_.info.compressed && chunk_elements_ > 0) {
      stats_.bytes_read += touched_chunks * dataset_.chunks_across_row * dataset_.average_chunk_storage_bytes;
    } else {
      stats_.bytes_read += unique_elements * size;
    }
  }

 private:
  /// Extent along dimension 0 of a block of `elements` elements.
  std::int64_t block_extent(std::int64_t elements) const {
    return dataset_.info.variable_length ? elements : elements / dataset_.row_elements;
  }
  std::int64_t chunk_of(std::int64_t position) const { return chunk_elements_ > 0 ? position / chunk_elements_ : 0; }

  void select_block(std::int64_t begin, std::int64_t elements, H5S_seloper_t op) {
    start_[0] = static_cast<hsize_t>(begin);
    count_[0] = static_cast<hsize_t>(block_extent(elements));
    STRIDER_H5_CHECK(H5Sselect_hyperslab(file_space_.get(), op, start_.data(), nullptr, count_.data(), nullptr),
                     "selecting " + dataset_.data_key + " elements " + std::to_string(begin));
  }

  std::string describe_rows(std::size_t first_run, std::size_t end_run) const {
    const std::int64_t first = plan_.unique_rows[plan_.runs[first_run].first_slot];
    const BatchPlan::Run& last = plan_.runs[end_run - 1];
    return std::to_string(first) + ".." + std::to_string(plan_.unique_rows[last.first_slot + last.slots - 1]);
  }

  H5File file_;
  H5Dataset data_;
  H5Dataspace file_space_;
  H5PropertyList transfer_;
  hid_t memory_type_ = H5I_INVALID_HID;
  std::int64_t chunk_elements_ = 0;  // chunk extent along dimension 0 (0: not chunked)
  std::vector<hsize_t> start_, count_;
  BatchPlan plan_;
  std::vector<std::byte> scratch_;
  OwnerThread owner_;
};

}  // namespace

std::unique_ptr<BatchReader> make_hdf5_reader(OpenedDataset dataset, H5File file, H5Dataset data) {
  return std::make_unique<Hdf5Reader>(std::move(dataset), std::move(file), std::move(data));
}

}  // namespace strider::io_detail
