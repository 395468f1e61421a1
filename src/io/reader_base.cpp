// The batch plan, the copy pool and the engine-independent part of read().
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "io/batch_layout.hpp"
#include "io/reader_detail.hpp"

namespace strider {

hid_t native_hdf5_type(ElementType type) {
  switch (type) {
    case ElementType::int8:
      return H5T_NATIVE_INT8;
    case ElementType::uint8:
      return H5T_NATIVE_UINT8;
    case ElementType::int16:
      return H5T_NATIVE_INT16;
    case ElementType::uint16:
      return H5T_NATIVE_UINT16;
    case ElementType::int32:
      return H5T_NATIVE_INT32;
    case ElementType::uint32:
      return H5T_NATIVE_UINT32;
    case ElementType::int64:
      return H5T_NATIVE_INT64;
    case ElementType::uint64:
      return H5T_NATIVE_UINT64;
    case ElementType::float32:
      return H5T_NATIVE_FLOAT;
    case ElementType::float64:
      return H5T_NATIVE_DOUBLE;
    case ElementType::float16:
      return io_detail::float16_hdf5_type();
  }
  return H5I_INVALID_HID;
}

namespace io_detail {

hid_t float16_hdf5_type() {
  // HDF5 1.10 has no predefined half type: IEEE binary16 in the native byte order, built the way
  // h5py builds it (float32's fields narrowed), created once and never closed.
  static const hid_t type = [] {
    const hid_t half = STRIDER_H5_CHECK(H5Tcopy(H5T_NATIVE_FLOAT), "copying the float type");
    STRIDER_H5_CHECK(H5Tset_fields(half, 15, 10, 5, 0, 10), "making the float16 type");
    STRIDER_H5_CHECK(H5Tset_size(half, 2), "making the float16 type");
    STRIDER_H5_CHECK(H5Tset_ebias(half, 15), "making the float16 type");
    return half;
  }();
  return type;
}

ShardIndex::ShardIndex(const std::vector<ShardLayout>& shards) {
  std::int64_t rows = 0, shortest = std::numeric_limits<std::int64_t>::max();
  for (const ShardLayout& shard : shards) {
    rows = shard.first_row + shard.rows;
    ends_.push_back(rows);
    if (shard.rows > 0) shortest = std::min(shortest, shard.rows);
  }
  ends_.push_back(std::numeric_limits<std::int64_t>::max());  // a sentinel: the scan always stops
  // Blocks of 2^shift rows, no longer than the shortest shard, in at most 2^20 table entries.
  shift_ = 0;
  while (shift_ < 62 && ((std::int64_t{2} << shift_) <= shortest || ((rows - 1) >> shift_) >= (1 << 20))) ++shift_;
  table_.resize(static_cast<std::size_t>(std::max<std::int64_t>(rows - 1, 0) >> shift_) + 1);
  std::uint32_t shard = 0;
  for (std::size_t block = 0; block < table_.size(); ++block) {
    const std::int64_t first = static_cast<std::int64_t>(block) << shift_;
    while (first >= ends_[shard]) ++shard;
    table_[block] = shard;
  }
}

void BatchPlan::build(const std::int64_t* indices, std::int64_t count, const ShardIndex& shards) {
  unique_rows.assign(indices, indices + count);
  slot_of_position.resize(static_cast<std::size_t>(count));
  if (std::adjacent_find(indices, indices + count, std::greater_equal<>()) == indices + count) {
    // Already in file order, each once (the store's load, --lookahead's windows, reads in order):
    // no sort and no search (a shuffled batch leaves this test at its first descent).
    std::iota(slot_of_position.begin(), slot_of_position.end(), std::int64_t{0});
  } else {
    std::sort(unique_rows.begin(), unique_rows.end());
    unique_rows.erase(std::unique(unique_rows.begin(), unique_rows.end()), unique_rows.end());
    for (std::int64_t k = 0; k < count; ++k) {
      slot_of_position[k] = std::lower_bound(unique_rows.begin(), unique_rows.end(), indices[k]) - unique_rows.begin();
    }
  }
  runs.clear();
  const auto slots = static_cast<std::int64_t>(unique_rows.size());
  for (std::int64_t slot = 0; slot < slots; ++slot) {
    const std::int64_t row = unique_rows[slot];
    if (!runs.empty() && row == unique_rows[slot - 1] + 1 && shards.shard_of(row) == runs.back().shard) {
      ++runs.back().slots;
    } else {
      runs.push_back({slot, 1, shards.shard_of(row)});
    }
  }
}

CopyPool::CopyPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

CopyPool::~CopyPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void CopyPool::run(int parts, const std::function<void(int)>& body) {
  if (workers_.empty() || parts <= 1) {
    for (int part = 0; part < parts; ++part) body(part);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  body_ = &body;
  parts_ = parts;
  next_part_ = 0;
  finished_parts_ = 0;
  failure_ = nullptr;
  ++generation_;
  wake_.notify_all();
  drain(lock);  // the caller's thread takes parts too
  done_.wait(lock, [&] { return finished_parts_ == parts_; });
  body_ = nullptr;
  if (failure_) std::rethrow_exception(failure_);
}

void CopyPool::worker_loop() {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    drain(lock);
  }
}

void CopyPool::drain(std::unique_lock<std::mutex>& lock) {
  while (body_ != nullptr && next_part_ < parts_) {
    const int part = next_part_++;
    const auto* body = body_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      (*body)(part);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !failure_) failure_ = failure;
    if (++finished_parts_ == parts_) done_.notify_all();
  }
}

ReaderBase::ReaderBase(OpenedDataset dataset, bool mapped_labels)
    : dataset_(std::move(dataset)), shard_index_(dataset_.shards) {
  if (dataset_.labels_per_batch) batch_labels_ = std::make_unique<BatchLabels>(dataset_, mapped_labels);
}

std::string ReaderBase::describe_rows(std::size_t shard, std::int64_t first, std::int64_t last) const {
  const ShardLayout& file = dataset_.shards[shard];
  return "rows " + std::to_string(first - file.first_row) + ".." + std::to_string(last - file.first_row) + " of " +
         file.path;
}

void ReaderBase::read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) {
  if (!dataset_.info.has_labels) STRIDER_THROW(UsageError, "read_labels: " + dataset_.path + " has no labels");
  if (first < 0 || count < 0 || first > dataset_.info.num_samples - count)
    STRIDER_THROW(UsageError, "read_labels: rows " + std::to_string(first) + " + " + std::to_string(count) +
                                  " are outside [0, " + std::to_string(dataset_.info.num_samples) + ")");
  if (batch_labels_) {
    batch_labels_->read_range(first, count, out);
  } else {
    std::copy(dataset_.labels.begin() + first, dataset_.labels.begin() + first + count, out);
  }
}

std::int64_t ReaderBase::samples_bytes(const std::int64_t* indices, std::int64_t count) const {
  if (!dataset_.info.variable_length) return count * dataset_.info.sample_bytes;
  std::int64_t elements = 0;
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t row = indices[k];
    if (row >= 0 && row < dataset_.info.num_samples) elements += dataset_.lengths[row];
  }
  return elements * element_size();
}

void ReaderBase::read(const std::int64_t* indices, std::int64_t count, const BatchDestination& destination) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t size = element_size();
  const std::int64_t row_bytes = dataset_.row_elements * size;  // fixed-size rows
  const bool variable = dataset_.info.variable_length;
  // Fixed-size rows get a constant size, not a test for variable lengths per row.
  const auto lay_out = [&](auto row_bytes_of) {
    return lay_out_batch(indices, count, dataset_.info.num_samples, dataset_.path, destination, row_bytes_of,
                         out_offsets_);
  };
  const std::int64_t bytes = variable ? lay_out([&](std::int64_t row) { return dataset_.lengths[row] * size; })
                                      : lay_out([row_bytes](std::int64_t) { return row_bytes; });
  const bool labels_wanted = destination.labels != nullptr && (batch_labels_ || !dataset_.labels.empty());
  const bool labels_gathered =
      labels_wanted && gathers_labels() && (!batch_labels_ || batch_labels_->mapped() != nullptr);
  if (labels_wanted && !labels_gathered) {
    const auto labels_start = std::chrono::steady_clock::now();
    if (batch_labels_) {
      batch_labels_->read(indices, count, destination.labels);
    } else {
      for (std::int64_t k = 0; k < count; ++k) destination.labels[k] = dataset_.labels[indices[k]];
    }
    stats_.labels_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - labels_start).count();
  }
  if (destination.offsets != nullptr && variable) {
    for (std::int64_t k = 0; k <= count; ++k) destination.offsets[k] = out_offsets_[k] / size;
  }
  if (count > 0)
    gather(indices, count, destination.samples, out_offsets_, labels_gathered ? destination.labels : nullptr);
  stats_.useful_bytes += bytes;
  stats_.batches += 1;
  stats_.read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

RowLabels ReaderBase::row_labels() const {
  RowLabels labels;
  if (batch_labels_) {
    labels.first = batch_labels_->mapped();
    labels.bytes = batch_labels_->stored_bytes();
    labels.int32 = batch_labels_->stored_as_int32();
    labels.convert = batch_labels_.get();
  } else {
    labels.first = reinterpret_cast<const std::byte*>(dataset_.labels.data());
  }
  return labels;
}

void ReaderBase::scatter(const BatchPlan& plan, const std::byte* scratch, std::byte* out,
                         const std::vector<std::int64_t>& out_offsets) const {
  // Byte offset of each unique row inside scratch.
  const auto slots = plan.unique_rows.size();
  std::vector<std::int64_t> scratch_offsets(slots + 1, 0);
  for (std::size_t slot = 0; slot < slots; ++slot)
    scratch_offsets[slot + 1] = scratch_offsets[slot] + row_elements(plan.unique_rows[slot]) * element_size();
  for (std::size_t k = 0; k < plan.slot_of_position.size(); ++k) {
    const std::int64_t slot = plan.slot_of_position[k];
    const std::int64_t bytes = out_offsets[k + 1] - out_offsets[k];
    if (bytes > 0) std::memcpy(out + out_offsets[k], scratch + scratch_offsets[slot], static_cast<std::size_t>(bytes));
  }
}

}  // namespace io_detail
}  // namespace strider
