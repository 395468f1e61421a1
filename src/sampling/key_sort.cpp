#include "sampling/key_sort.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace strider::sampling_detail {

namespace {

/// Each bucket's count replaced by its first place in the sorted output (an exclusive prefix sum).
template <typename Counts>
void counts_to_starts(Counts& counts) {
  std::size_t place = 0;
  for (std::size_t& count : counts) {
    const std::size_t here = count;
    count = place;
    place += here;
  }
}

}  // namespace

int bit_width(std::uint64_t value) noexcept {
  int bits = 0;
  while (bits < 64 && (value >> bits) != 0) ++bits;
  return bits;
}

void sort_keys(std::vector<std::uint64_t>& keys, std::vector<std::uint64_t>& spare) {
  constexpr int kDigitBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
  std::uint64_t largest = 0;
  for (std::uint64_t key : keys) largest |= key;
  const int passes = (bit_width(largest) + kDigitBits - 1) / kDigitBits;
  // A pass costs about 2 * size + kBuckets steps, a comparison sort size * log2(size) comparisons.
  if (keys.size() < 512 || static_cast<double>(passes) * 3.0 > std::log2(static_cast<double>(keys.size()))) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  spare.resize(keys.size());
  std::size_t counts[kBuckets];
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = pass * kDigitBits;
    std::fill(std::begin(counts), std::end(counts), std::size_t{0});
    for (std::uint64_t key : keys) ++counts[(key >> shift) & (kBuckets - 1)];
    counts_to_starts(counts);
    for (std::uint64_t key : keys) spare[counts[(key >> shift) & (kBuckets - 1)]++] = key;
    keys.swap(spare);
  }
}

bool sort_dense_keys(std::vector<std::uint64_t>& keys, int index_bits, const std::int64_t* lengths,
                     std::vector<std::uint64_t>& spare, std::vector<std::uint64_t>& bitmap,
                     std::vector<std::size_t>& starts) {
  constexpr std::uint64_t kIndicesPerKey = 128;  // two bitmap words per key at most
  constexpr std::uint64_t kLengthsPerKey = 1;    // a count per key at most
  const std::size_t size = keys.size();
  if (size < 512 || index_bits <= 0 || index_bits >= 64) return false;
  const std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;
  std::uint64_t first_index = index_mask, last_index = 0, shortest = ~std::uint64_t{0}, longest = 0;
  for (const std::uint64_t key : keys) {
    first_index = std::min(first_index, key & index_mask);
    last_index = std::max(last_index, key & index_mask);
    shortest = std::min(shortest, key >> index_bits);
    longest = std::max(longest, key >> index_bits);
  }
  const std::uint64_t indices = last_index - first_index + 1, length_span = longest - shortest + 1;
  if (indices / kIndicesPerKey > size || length_span / kLengthsPerKey > size) return false;

  bitmap.assign(static_cast<std::size_t>((indices + 63) / 64), 0);
  starts.assign(static_cast<std::size_t>(length_span), 0);  // each length's count, then its next place
  for (const std::uint64_t key : keys) {
    const std::uint64_t offset = (key & index_mask) - first_index;
    bitmap[static_cast<std::size_t>(offset >> 6)] |= std::uint64_t{1} << (offset & 63);
    ++starts[static_cast<std::size_t>((key >> index_bits) - shortest)];
  }
  counts_to_starts(starts);
  spare.resize(size);
  for (std::size_t word = 0; word < bitmap.size(); ++word) {
    for (std::uint64_t bits = bitmap[word]; bits != 0; bits &= bits - 1) {
      const std::uint64_t index = first_index + word * 64 + static_cast<std::uint64_t>(__builtin_ctzll(bits));
      const auto length = static_cast<std::uint64_t>(lengths[index]);
      const std::uint64_t slot = length - shortest;
      if (slot >= length_span) return false;  // a key whose length is not lengths[index]: keys untouched
      spare[starts[static_cast<std::size_t>(slot)]++] = length << index_bits | index;
    }
  }
  keys.swap(spare);
  return true;
}

}  // namespace strider::sampling_detail
