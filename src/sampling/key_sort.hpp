#pragma once
// The sorts of the bucketed plan's windows: distinct 64-bit keys (length << index_bits | index)
// in ascending order, that is by length and then by index.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strider::sampling_detail {

/// The bits `value` needs (0 for 0).
int bit_width(std::uint64_t value) noexcept;

/// Sorts distinct keys ascending: a least-significant-digit radix sort, 11 bits a pass, over the
/// bits the largest key uses (3 passes for 200,000 samples of up to 512 tokens), where that beats
/// a comparison sort; `spare` is scratch of any content.
void sort_keys(std::vector<std::uint64_t>& keys, std::vector<std::uint64_t>& spare);

/// Sorts distinct packed keys, (lengths[index] << index_bits | index), ascending where their indices
/// are dense enough: each index marked in a bitmap of the keys' index range, the marks read back in
/// index order and each dealt to its length's place (a stable counting sort by length, so ties stay
/// in index order). One pass over the keys, one over the bitmap and one scattered write a key,
/// against the radix sort's three passes of scattered writes. Returns false, the keys untouched,
/// for fewer than 512 keys, where the indices span more than 128 per key (the bitmap would cost
/// more than it saves) or the lengths more values than there are keys (the counts would). `spare`,
/// `bitmap` and `starts` are scratch of any content, reused from one window to the next.
bool sort_dense_keys(std::vector<std::uint64_t>& keys, int index_bits, const std::int64_t* lengths,
                     std::vector<std::uint64_t>& spare, std::vector<std::uint64_t>& bitmap,
                     std::vector<std::size_t>& starts);

}  // namespace strider::sampling_detail
