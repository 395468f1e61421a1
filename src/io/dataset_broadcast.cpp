// Rank 0's validated dataset to every rank: the layout as one message of bytes, then the labels and
// offsets (the large arrays) as they are.
#include <cstring>

#include "io/reader_detail.hpp"

namespace strider::io_detail {
namespace {

/// Appends values to bytes; Reader takes them back in the same order (same machine type sizes on
/// every rank of a job).
class Writer {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* bytes = reinterpret_cast<const char*>(&value);
    bytes_.append(bytes, sizeof(T));
  }
  void put(const std::string& text) {
    put(static_cast<std::uint64_t>(text.size()));
    bytes_.append(text);
  }
  void put(const std::vector<std::int64_t>& values) {
    put(static_cast<std::uint64_t>(values.size()));
    for (std::int64_t value : values) put(value);
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  void get(T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
  }
  void get(std::string& text) {
    std::uint64_t size = 0;
    get(size);
    text.assign(bytes_, at_, size);
    at_ += size;
  }
  void get(std::vector<std::int64_t>& values) {
    std::uint64_t size = 0;
    get(size);
    values.resize(size);
    for (std::int64_t& value : values) get(value);
  }

 private:
  const std::string& bytes_;
  std::size_t at_ = 0;
};

/// Every field but the arrays that grow with N (labels, offsets, lengths), in one order for both
/// directions: `io` is a Writer or a Reader, `D` a const or non-const OpenedDataset.
template <typename Io, typename D>
void transfer_layout(Io& io, D& dataset) {
  auto& info = dataset.info;
  io.put_or_get(dataset.path);
  io.put_or_get(info.path);
  io.put_or_get(info.variable_length);
  io.put_or_get(info.num_samples);
  io.put_or_get(info.sample_shape);
  io.put_or_get(info.element_type);
  io.put_or_get(info.sample_bytes);
  io.put_or_get(info.num_tokens);
  io.put_or_get(info.has_labels);
  io.put_or_get(info.labels_per_batch);
  io.put_or_get(info.layout);
  io.put_or_get(info.chunk_shape);
  io.put_or_get(info.compressed);
  io.put_or_get(info.compression);
  io.put_or_get(dataset.data_key);
  io.put_or_get(dataset.labels_per_batch);
  io.put_or_get(dataset.labels_key);
  io.put_or_get(dataset.label_type);
  io.put_or_get(dataset.labels_offset_bytes);
  io.put_or_get(dataset.row_elements);
  io.put_or_get(dataset.dims);
  io.put_or_get(dataset.raw_readable);
  io.put_or_get(dataset.raw_refusal);
  std::uint64_t shards = dataset.shards.size();
  io.put_or_get(shards);
  if constexpr (!std::is_const_v<D>) dataset.shards.resize(shards);
  for (auto& shard : dataset.shards) {
    io.put_or_get(shard.path);
    io.put_or_get(shard.data_key);
    io.put_or_get(shard.vlen);
    io.put_or_get(shard.first_row);
    io.put_or_get(shard.rows);
    io.put_or_get(shard.first_element);
    io.put_or_get(shard.elements);
    io.put_or_get(shard.layout);
    io.put_or_get(shard.raw_readable);
    io.put_or_get(shard.raw_refusal);
    io.put_or_get(shard.file_offset_bytes);
    io.put_or_get(shard.chunk_rows);
    io.put_or_get(shard.compressed);
    io.put_or_get(shard.average_chunk_storage_bytes);
    io.put_or_get(shard.chunks_across_row);
    io.put_or_get(shard.deflate_filter);
    io.put_or_get(shard.shuffle_filter);
  }
}

struct Put {
  Writer writer;
  template <typename T>
  void put_or_get(const T& value) {
    writer.put(value);
  }
};
struct Get {
  Reader reader;
  template <typename T>
  void put_or_get(T& value) {
    reader.get(value);
  }
};

}  // namespace

void broadcast_strings(const Communicator& comm, std::vector<std::string>& values) {
  Put put;
  put.writer.put(static_cast<std::uint64_t>(values.size()));
  for (const std::string& value : values) put.writer.put(value);
  std::string bytes = std::move(put.writer.bytes());
  comm.broadcast(bytes);
  Get get{Reader(bytes)};
  std::uint64_t count = 0;
  get.reader.get(count);
  values.resize(count);
  for (std::string& value : values) get.reader.get(value);
}

void broadcast_dataset(const Communicator& comm, OpenedDataset& dataset) {
  std::string bytes;
  if (comm.is_root()) {
    Put put;
    transfer_layout(put, static_cast<const OpenedDataset&>(dataset));
    bytes = std::move(put.writer.bytes());
  }
  comm.broadcast(bytes);
  if (!comm.is_root()) {
    Get get{Reader(bytes)};
    transfer_layout(get, dataset);
    for (const ShardLayout& shard : dataset.shards)
      dataset.info.shards.push_back({shard.path, shard.first_row, shard.rows});
  }
  if (dataset.info.has_labels && !dataset.labels_per_batch) comm.broadcast(dataset.labels);
  if (dataset.info.variable_length) {
    comm.broadcast(dataset.offsets);
    dataset.lengths.resize(static_cast<std::size_t>(dataset.info.num_samples));
    for (std::int64_t i = 0; i < dataset.info.num_samples; ++i)
      dataset.lengths[i] = dataset.offsets[i + 1] - dataset.offsets[i];
  }
}

}  // namespace strider::io_detail
