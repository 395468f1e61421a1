#pragma once
// The sorts of the bucketed plan's windows: distinct 64-bit keys (length << index_bits | index)
// in ascending order, that is by length and then by index.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace strider::sampling_detail {

/// std::allocator, but resize() leaves the new values uninitialized: for the plans' scratch of N
/// words that is written whole before it is read (a zeroed one costs a pass over it first).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() noexcept = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>& /*other*/) noexcept {}  // NOLINT(google-explicit-constructor)
  template <typename U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;
  }
  template <typename U, typename... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};
template <typename T>
using ScratchVector = std::vector<T, UninitializedAllocator<T>>;

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

/// An epoch's shuffled order as a bucketed plan's first part holds it where it is not marked in
/// 32-bit words (WindowMarks::order): packed 64-bit words (length << index_bits | index).
struct OrderWords {
  ScratchVector<std::uint64_t> wide;
};

/// Every window of an epoch's order sorted and laid out as the plan's batches at once: a counting
/// sort by (window, length) that cuts the order into windows and keeps its indices (one pass over
/// the order, in order), then, once the batches are packed from each window's counts alone
/// (place_windows), marks each index with its window and deals the indices out in index order
/// (one pass over the lengths, in order) to their places in the plan, so that each window holds
/// its own samples ascending by (length, index), less its last ones, which carry on into the next
/// window. The windows' own sorts would instead each look a length up per sample, across all N
/// lengths, and then be merged and copied. The marks are what the first pass leaves for the rest,
/// which needs nothing else of the order: it can run later, on another copy of the sampler. The
/// random writes that mark each index's window begin the second part (mark_positions, which a
/// rank waiting for another's plan takes a slice at a time; deal_windows marks the rest): the
/// node's ranks make the two parts of a shared plan at once, and each then costs about as much as
/// the other.
struct WindowMarks {
  std::vector<std::size_t> ends;           // each window's end in the order (ascending; the last: N)
  ScratchVector<std::uint32_t> order;      // each position's index (mark_windows)
  ScratchVector<std::uint16_t> window_of;  // each index's window, for the order's first `marked` positions
  std::size_t marked = 0;                  // (mark_positions; deal_windows marks the rest)
  // Each (window, length)'s count of samples, window-major (mark_windows); then the place in the
  // plan of its next sample that stays in the window (place_windows).
  std::vector<std::size_t> places;
  std::uint64_t shortest = 1, lengths = 0;  // the (window, length) buckets' lengths: shortest + [0, lengths)
  // Per window (place_windows): the length, as an offset from `shortest`, from which its samples
  // carry on into the next window (`lengths`: none do), and how many of that length stay.
  std::vector<std::uint64_t> carried_from;
  std::vector<std::size_t> staying;
};

/// Each index's bucket, its length less `shortest`, read from the lengths themselves (the plans'
/// other source of buckets is an array of them in 2 bytes).
struct LengthBuckets {
  const std::int64_t* lengths;
  std::uint64_t shortest;
  std::uint64_t operator[](std::size_t index) const noexcept {
    return static_cast<std::uint64_t>(lengths[index]) - shortest;
  }
};

/// Whether mark_windows takes an order of `size` keys with lengths in [shortest, longest] cut into
/// at most `most_windows` windows: at most max(N / 4, 4096) and 65,536 (window, length) buckets,
/// whose counts stay within a core's cache, 65,535 windows, and indices of 4 bytes (N <= 2^32).
bool windows_markable(std::size_t size, std::int64_t shortest, std::int64_t longest,
                      std::uint64_t most_windows) noexcept;

/// The first pass, which also cuts the order into windows: each ends once its keys' lengths add up
/// to `window_tokens` (>= 1), or with the order (marks.ends). `keys` holds each index of
/// [0, size) once, as a packed key (length << index_bits | index), its length within
/// [shortest, longest]. Returns false (the marks then of no use) where windows_markable does, or
/// where the order makes more than `most_windows` windows.
bool mark_windows(const std::uint64_t* keys, std::size_t size, int index_bits, std::int64_t shortest,
                  std::int64_t longest, std::int64_t window_tokens, std::uint64_t most_windows, WindowMarks& marks);
/// The same over 32-bit keys, ((length - shortest) << index_bits | index), which may be
/// marks.order's own words: each is read before its index replaces it.
bool mark_windows(const std::uint32_t* keys, std::size_t size, int index_bits, std::int64_t shortest,
                  std::int64_t longest, std::int64_t window_tokens, std::uint64_t most_windows, WindowMarks& marks);

/// Marks the indices at up to `count` more positions of the order, in order, with their windows
/// (marks.window_of): the first step of deal_windows, which a rank can take a slice at a time
/// while it waits for another's plan (SharedPlan::share's `ahead`). Returns whether positions are
/// left to mark.
bool mark_positions(WindowMarks& marks, std::size_t count);

/// What becomes of a window's samples, sorted by (length, index): `pack(counts, last, first)` packs
/// a window whose samples have counts[l] of length marks.shortest + l (l < marks.lengths), the
/// first of them at place `first` of the plan, and returns how many of its last samples carry on
/// into the next window (none from the last, `last`).
using PackWindow = std::function<std::size_t(const std::size_t* counts, bool last, std::size_t first)>;

/// Walks the windows in order, each window's counts with the samples carried on from the window
/// before added, and packs each (`pack`); then marks.places holds each (window, length)'s first
/// place in the plan, after the window's shorter samples that stay, and marks.carried_from and
/// marks.staying say which carry on. Returns false where `pack` carries on more samples than its
/// window holds, or some from the last.
bool place_windows(WindowMarks& marks, const PackWindow& pack);

/// The second part: out[place] = index for every index of [0, N), at its (window, length)'s next
/// place, or, where that window carries its samples of that length on, at the next window's. The
/// samples of a (window, length), those carried in included, come in index order, so the last ones
/// are those that carry on. lengths[index] must be the length each index's key had (a plan's marks
/// are made from the same lengths): then every place of [0, N) is written once. Uses up
/// marks.places and marks.staying, and marks the positions mark_positions has not. Returns false (out then partly
/// written) where a sample would carry on past the last window, which only lengths other than the
/// marks' do. `out` holds indices of 4 bytes (N <= 2^32) or 8 (wide_plan_indices).
bool deal_windows(std::uint32_t* out, const std::int64_t* lengths, WindowMarks& marks);
bool deal_windows(std::int64_t* out, const std::int64_t* lengths, WindowMarks& marks);
/// The same from each index's bucket, its length less marks.shortest, in 2 bytes.
bool deal_windows(std::uint32_t* out, const std::uint16_t* buckets, WindowMarks& marks);
bool deal_windows(std::int64_t* out, const std::uint16_t* buckets, WindowMarks& marks);

/// Whether a bucketed plan of `samples` samples holds their indices in 8 bytes each: past 2^32
/// samples, or everywhere while a test says so (wide_plan_indices_for_tests), so that the wide path
/// runs in the tests too. Else in 4.
bool wide_plan_indices(std::size_t samples) noexcept;
/// Tests: bucketed samplers made while this is set hold their plans' indices in 8 bytes whatever N.
void wide_plan_indices_for_tests(bool wide) noexcept;

}  // namespace strider::sampling_detail
