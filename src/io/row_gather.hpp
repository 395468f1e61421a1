#pragma once
// The gather of shuffled fixed-size rows from memory, shared by the mmap engine (rows of the mapped
// file) and the in-memory store (rows of the node segment): prefetched kRowsAhead rows ahead, and
// for the common row sizes a copy whose size is a compile-time constant, the row's int32 label
// copied in the same pass.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace strider::io_detail {

/// Shuffled rows are random memory accesses, each a cache miss: asking for the rows kRowsAhead
/// positions ahead keeps several misses in flight while one row is copied. The distance matters
/// little within a few rows either way of it.
inline constexpr std::int64_t kRowsAhead = 8;

/// Prefetches the first KiB of a row; the hardware prefetcher follows longer rows on its own.
/// The lines are asked for in every cache level (prefetcht0, locality 3), the labels' too: with the
/// non-temporal hint (prefetchnta) the mmap engine delivered 25-40% fewer samples/s on w1, w3 and
/// w4 on a Xeon (a 2-core VM), and the gather limit measures both hints.
/// Always inlined, as is every lambda here that prefetches: GCC takes a function that does nothing
/// but prefetch for one without effects and drops its calls (GCC 12 at -O2 dropped every prefetch
/// of the mmap engine that way).
[[gnu::always_inline]] inline void prefetch_row(const std::byte* at, std::int64_t bytes) noexcept {
  for (std::int64_t line = 0; line < std::min<std::int64_t>(bytes, 1024); line += 64)
    __builtin_prefetch(at + line, 0, 3);
}

/// The copy of fixed-size rows of kRowBytes (row r at rows + r * kRowBytes, its int32 label at
/// labels + r * 4): row k of the batch goes to out + k * kRowBytes, its label (when kLabels) to
/// out_labels[k], positions [begin, end).
/// With the size a constant the compiler turns each memcpy into a few vector moves and the
/// prefetches into a fixed sequence: no call and no size dispatch per row, no table of addresses.
template <std::int64_t kRowBytes, bool kLabels>
inline void gather_fixed_rows(const std::byte* rows, const std::byte* labels, const std::int64_t* indices,
                              std::int64_t begin, std::int64_t end, std::byte* out, std::int32_t* out_labels) {
  const auto prefetch = [&](std::int64_t k) __attribute__((always_inline)) {
    prefetch_row(rows + indices[k] * kRowBytes, kRowBytes);
    if constexpr (kLabels) __builtin_prefetch(labels + indices[k] * 4, 0, 3);
  };
  for (std::int64_t k = begin; k < std::min(end, begin + kRowsAhead); ++k) prefetch(k);
  for (std::int64_t k = begin; k < end; ++k) {
    if (k + kRowsAhead < end) prefetch(k + kRowsAhead);
    const std::int64_t row = indices[k];
    std::memcpy(out + k * kRowBytes, rows + row * kRowBytes, kRowBytes);
    if constexpr (kLabels) std::memcpy(out_labels + k, labels + row * 4, 4);
  }
}

using FixedRowsGather = void (*)(const std::byte*, const std::byte*, const std::int64_t*, std::int64_t, std::int64_t,
                                 std::byte*, std::int32_t*);

/// The specialised copy for rows of `row_bytes` (with or without labels), or null for a size
/// without one: the common row sizes of feature vectors (16..128 float32).
inline FixedRowsGather fixed_rows_gather(std::int64_t row_bytes, bool labels) {
  switch (row_bytes) {
    case 64:
      return labels ? gather_fixed_rows<64, true> : gather_fixed_rows<64, false>;
    case 128:
      return labels ? gather_fixed_rows<128, true> : gather_fixed_rows<128, false>;
    case 256:
      return labels ? gather_fixed_rows<256, true> : gather_fixed_rows<256, false>;
    case 512:
      return labels ? gather_fixed_rows<512, true> : gather_fixed_rows<512, false>;
    default:
      return nullptr;
  }
}

}  // namespace strider::io_detail
