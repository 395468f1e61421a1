// Per-batch labels (BatchLabels) and the POSIX file helpers the raw engines share (FileDescriptor,
// FileMapping).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "io/mapping_faults.hpp"
#include "io/reader_detail.hpp"

namespace strider::io_detail {

FileDescriptor::FileDescriptor(const std::string& path, int extra_flags)
    : descriptor_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | extra_flags)) {
  if (descriptor_ < 0) STRIDER_THROW_ERRNO("open()", "opening " + path, errno);
}

FileDescriptor::~FileDescriptor() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

FileMapping::FileMapping(int descriptor, std::int64_t offset, std::int64_t bytes, const std::string& what) {
  if (bytes == 0) return;
  const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  const std::int64_t aligned = offset / page * page;
  map_bytes_ = static_cast<std::size_t>(offset - aligned + bytes);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, descriptor, aligned);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    STRIDER_THROW_ERRNO("mmap()", "mapping " + what + " (" + std::to_string(map_bytes_) + " bytes)", errno);
  }
  data_ = static_cast<const std::byte*>(map_) + (offset - aligned);
  fault_slot_ = register_mapping(map_, map_bytes_, what);
  map_cached_pages();
}

FileMapping::~FileMapping() {
  release_mapping(fault_slot_);
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void FileMapping::map_cached_pages() noexcept {
#ifdef MADV_POPULATE_READ
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t window_pages = std::size_t{1} << 18;  // mincore 1 GiB (4 KiB pages) at a time
  std::vector<unsigned char> resident(window_pages);
  auto* base = static_cast<unsigned char*>(map_);
  const std::size_t pages = (map_bytes_ + page - 1) / page;
  for (std::size_t first = 0; first < pages; first += window_pages) {
    const std::size_t count = std::min(window_pages, pages - first);
    if (::mincore(base + first * page, std::min(count * page, map_bytes_ - first * page), resident.data()) != 0) return;
    std::size_t run = 0;
    while (run < count) {
      if (!(resident[run] & 1)) {
        ++run;
        continue;
      }
      std::size_t end = run;
      while (end < count && (resident[end] & 1)) ++end;
      if (::madvise(base + (first + run) * page, (end - run) * page, MADV_POPULATE_READ) != 0) return;
      run = end;
    }
  }
#endif
}

namespace {

/// Rows whose labels lie within this many bytes of a group's first are read by one pread.
constexpr std::int64_t kCoalesceBytes = 4096;

template <class Stored>
std::int64_t load(const std::byte* stored, bool* fits) {
  Stored value;
  std::memcpy(&value, stored, sizeof value);
  if constexpr (std::is_same_v<Stored, std::uint64_t>) {
    *fits = value <= static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
    return *fits ? static_cast<std::int64_t>(value) : -1;
  } else {
    const auto wide = static_cast<std::int64_t>(value);
    *fits = wide >= std::numeric_limits<std::int32_t>::min() && wide <= std::numeric_limits<std::int32_t>::max();
    return wide;
  }
}

}  // namespace

BatchLabels::BatchLabels(const OpenedDataset& dataset, bool mapped)
    : path_(dataset.shards.front().path),
      key_(dataset.labels_key),
      type_(dataset.label_type),
      size_(static_cast<std::int64_t>(element_bytes(dataset.label_type))),
      offset_(dataset.labels_offset_bytes),
      rows_(dataset.info.num_samples),
      file_(path_) {
  struct stat status {};
  if (::fstat(file_.get(), &status) != 0) STRIDER_THROW_ERRNO("fstat()", "checking the size of " + path_, errno);
  if (offset_ < 0 || offset_ + rows_ * size_ > status.st_size)
    STRIDER_THROW(DataError, "cannot open " + path_ + ": " + key_ + " needs bytes " + std::to_string(offset_) + ".." +
                                 std::to_string(offset_ + rows_ * size_) + " but the file has " +
                                 std::to_string(status.st_size) + " (truncated?)");
  if (!mapped) return;
  mapping_ = std::make_unique<FileMapping>(file_.get(), offset_, rows_ * size_,
                                           "the " + std::to_string(rows_) + " labels " + key_ + " of " + path_);
  mapped_ = mapping_->data();
}

std::int32_t BatchLabels::value(const std::byte* stored, std::int64_t row) const {
  bool fits = true;
  std::int64_t wide = 0;
  switch (type_) {
    case ElementType::int8:
      wide = load<std::int8_t>(stored, &fits);
      break;
    case ElementType::uint8:
      wide = load<std::uint8_t>(stored, &fits);
      break;
    case ElementType::int16:
      wide = load<std::int16_t>(stored, &fits);
      break;
    case ElementType::uint16:
      wide = load<std::uint16_t>(stored, &fits);
      break;
    case ElementType::int32:
      wide = load<std::int32_t>(stored, &fits);
      break;
    case ElementType::uint32:
      wide = load<std::uint32_t>(stored, &fits);
      break;
    case ElementType::int64:
      wide = load<std::int64_t>(stored, &fits);
      break;
    case ElementType::uint64:
      wide = load<std::uint64_t>(stored, &fits);
      break;
    default:
      fits = false;
      break;  // open_reader refuses float labels
  }
  if (!fits) STRIDER_THROW(DataError, key_ + "[" + std::to_string(row) + "] in " + path_ + " does not fit int32");
  return static_cast<std::int32_t>(wide);
}

const std::byte* BatchLabels::stored(std::int64_t first, std::int64_t count) {
  if (mapped_ != nullptr) return mapped_ + first * size_;
  const std::int64_t bytes = count * size_;
  if (static_cast<std::int64_t>(scratch_.size()) < bytes) scratch_.resize(static_cast<std::size_t>(bytes));
  pread_exactly(file_.get(), scratch_.data(), bytes, offset_ + first * size_, [&] {
    return key_ + " rows " + std::to_string(first) + ".." + std::to_string(first + count - 1) + " of " + path_;
  });
  return scratch_.data();
}

void BatchLabels::read(const std::int64_t* indices, std::int64_t count, std::int32_t* out) {
  if (mapped_ != nullptr) {
    for (std::int64_t k = 0; k < count; ++k) out[k] = value(stored(indices[k], 1), indices[k]);
    return;
  }
  order_.resize(static_cast<std::size_t>(count));
  for (std::int64_t k = 0; k < count; ++k) order_[k] = {indices[k], k};
  std::sort(order_.begin(), order_.end());
  std::size_t group = 0;
  while (group < order_.size()) {
    const std::int64_t first_row = order_[group].first;
    std::size_t end = group + 1;
    while (end < order_.size() && (order_[end].first - first_row + 1) * size_ <= kCoalesceBytes) ++end;
    const std::byte* rows = stored(first_row, order_[end - 1].first - first_row + 1);
    for (std::size_t i = group; i < end; ++i)
      out[order_[i].second] = value(rows + (order_[i].first - first_row) * size_, order_[i].first);
    group = end;
  }
}

void BatchLabels::read_range(std::int64_t first, std::int64_t count, std::int32_t* out) {
  if (count <= 0) return;
  const std::byte* rows = stored(first, count);
  for (std::int64_t k = 0; k < count; ++k) out[k] = value(rows + k * size_, first + k);
}

}  // namespace strider::io_detail
