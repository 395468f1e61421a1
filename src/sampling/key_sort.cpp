#include "sampling/key_sort.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <limits>

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

bool windows_markable(std::size_t size, std::int64_t shortest, std::int64_t longest,
                      std::uint64_t most_windows) noexcept {
  constexpr std::uint64_t kMostBuckets = std::uint64_t{1} << 16;
  if (size == 0 || size - 1 > std::numeric_limits<std::uint32_t>::max() || shortest < 1 || longest < shortest ||
      most_windows < 1 || most_windows > std::numeric_limits<std::uint16_t>::max())
    return false;
  const std::uint64_t most = std::min<std::uint64_t>(kMostBuckets, std::max<std::uint64_t>(size / 4, 4096));
  return static_cast<std::uint64_t>(longest - shortest) + 1 <= most / most_windows;
}

namespace {

// mark_windows over keys of 64 bits, (length << index_bits | index), or of 32, ((length - shortest)
// << index_bits | index).
template <typename Key>
bool mark_windows_of(const Key* keys, std::size_t size, int index_bits, std::int64_t shortest, std::int64_t longest,
                     std::int64_t window_tokens, std::uint64_t most_windows, WindowMarks& marks) {
  constexpr int kKeyBits = 8 * sizeof(Key);
  if (!windows_markable(size, shortest, longest, most_windows) || index_bits <= 0 || index_bits >= kKeyBits ||
      window_tokens < 1)
    return false;
  const std::uint64_t base = kKeyBits == 64 ? 0 : static_cast<std::uint64_t>(shortest);  // what a key's length lacks
  marks.shortest = static_cast<std::uint64_t>(shortest);
  marks.lengths = static_cast<std::uint64_t>(longest - shortest) + 1;

  const auto span = static_cast<std::size_t>(marks.lengths);
  marks.ends.clear();
  marks.marked = 0;
  marks.order.resize(size);
  marks.places.assign(static_cast<std::size_t>(most_windows) * span, 0);
  std::uint32_t* const order = marks.order.data();
  const std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;
  std::size_t* counts = marks.places.data();
  std::uint16_t window = 0;
  std::int64_t window_sum = 0;
  for (std::size_t position = 0; position < size; ++position) {
    const std::uint64_t key = keys[position];
    const std::uint64_t length = (key >> index_bits) + base;
    order[position] = static_cast<std::uint32_t>(key & index_mask);
    ++counts[static_cast<std::size_t>(length - marks.shortest)];
    window_sum += static_cast<std::int64_t>(length);
    if (window_sum >= window_tokens && position + 1 < size) {
      if (++window == most_windows) return false;  // more windows than said: the marks are of no use
      marks.ends.push_back(position + 1);
      counts += span;
      window_sum = 0;
    }
  }
  marks.ends.push_back(size);
  marks.places.resize(marks.ends.size() * span);
  return true;
}

}  // namespace

bool mark_windows(const std::uint64_t* keys, std::size_t size, int index_bits, std::int64_t shortest,
                  std::int64_t longest, std::int64_t window_tokens, std::uint64_t most_windows, WindowMarks& marks) {
  return mark_windows_of(keys, size, index_bits, shortest, longest, window_tokens, most_windows, marks);
}

bool mark_windows(const std::uint32_t* keys, std::size_t size, int index_bits, std::int64_t shortest,
                  std::int64_t longest, std::int64_t window_tokens, std::uint64_t most_windows, WindowMarks& marks) {
  return mark_windows_of(keys, size, index_bits, shortest, longest, window_tokens, most_windows, marks);
}

bool place_windows(WindowMarks& marks, const PackWindow& pack) {
  const auto span = static_cast<std::size_t>(marks.lengths);
  const std::size_t windows = marks.ends.size();
  std::vector<std::size_t> merged(span), carried(span, 0);
  marks.carried_from.assign(windows, marks.lengths);
  marks.staying.assign(windows, 0);
  std::size_t first = 0;
  for (std::size_t window = 0; window < windows; ++window) {
    std::size_t* const counts = marks.places.data() + window * span;
    std::size_t size = 0;
    for (std::size_t length = 0; length < span; ++length) {
      merged[length] = counts[length] + carried[length];
      size += merged[length];
    }
    const bool last = window + 1 == windows;
    std::size_t left = pack(merged.data(), last, first);
    if (left > size || (last && left != 0)) return false;
    // The samples carried on: the longest, the last of their shortest length by index.
    for (std::size_t length = span; length-- > 0;) {
      carried[length] = std::min(left, merged[length]);
      left -= carried[length];
      if (carried[length] > 0) {
        marks.carried_from[window] = length;
        marks.staying[window] = merged[length] - carried[length];
      }
    }
    for (std::size_t length = 0; length < span; ++length) {
      counts[length] = first;
      first += merged[length] - carried[length];
    }
  }
  return true;
}

bool mark_positions(WindowMarks& marks, std::size_t count) {
  const std::size_t size = marks.order.size();
  marks.window_of.resize(size);  // its content kept: the positions marked before
  std::uint16_t* const window_of = marks.window_of.data();
  const std::uint32_t* const order = marks.order.data();
  const std::size_t stop = marks.marked + std::min(count, size - marks.marked);  // marked <= size
  // The window of the first position to mark: the first that ends past it.
  auto window = static_cast<std::size_t>(std::upper_bound(marks.ends.begin(), marks.ends.end(), marks.marked) -
                                         marks.ends.begin());
  for (std::size_t position = marks.marked; position < stop && window < marks.ends.size(); ++window)
    for (const std::size_t end = std::min(marks.ends[window], stop); position < end; ++position)
      window_of[order[position]] = static_cast<std::uint16_t>(window);
  marks.marked = stop;
  return stop < size;
}

namespace {

template <typename Index, typename Buckets>
bool deal_windows_into(Index* out, const Buckets bucket_of, WindowMarks& marks) {
  const std::size_t size = marks.order.size(), windows = marks.ends.size();
  const auto span = static_cast<std::size_t>(marks.lengths);
  std::size_t* const places = marks.places.data();
  // Each index's window, from the order cut into windows: those not marked yet.
  mark_positions(marks, size);
  const std::uint16_t* const window_of = marks.window_of.data();
  const std::uint64_t* const carried_from = marks.carried_from.data();
  std::size_t* const staying = marks.staying.data();
  // In index order: ties by length keep index order, and the last of a tie carry on. Each place is
  // a random write into the plan, which outgrows a core's first cache: the place of the index
  // kAhead on (its bucket's next place now, on the line it lands on or near it) is asked for
  // meanwhile (w3's plan of 200,000 samples 1.60 to 1.44 ms). Carries are not followed there.
  constexpr std::size_t kAhead = 16;
  for (std::size_t index = 0; index < size; ++index) {
    if (index + kAhead < size) {
      const std::uint64_t ahead = bucket_of[index + kAhead];
      if (ahead < span) __builtin_prefetch(out + places[window_of[index + kAhead] * span + ahead], 1);
    }
    const std::uint64_t length = bucket_of[index];
    std::size_t window = window_of[index];
    while (length >= carried_from[window]) {
      if (length == carried_from[window] && staying[window] > 0) {
        --staying[window];
        break;
      }
      if (++window == windows) return false;  // carried on from the last window: not the marks' lengths
    }
    out[places[window * span + static_cast<std::size_t>(length)]++] = static_cast<Index>(index);
  }
  return true;
}

}  // namespace

bool deal_windows(std::uint32_t* out, const std::int64_t* lengths, WindowMarks& marks) {
  return deal_windows_into(out, LengthBuckets{lengths, marks.shortest}, marks);
}

bool deal_windows(std::int64_t* out, const std::int64_t* lengths, WindowMarks& marks) {
  return deal_windows_into(out, LengthBuckets{lengths, marks.shortest}, marks);
}

bool deal_windows(std::uint32_t* out, const std::uint16_t* buckets, WindowMarks& marks) {
  return deal_windows_into(out, buckets, marks);
}

bool deal_windows(std::int64_t* out, const std::uint16_t* buckets, WindowMarks& marks) {
  return deal_windows_into(out, buckets, marks);
}

namespace {
std::atomic<bool> wide_for_tests{false};
}  // namespace

bool wide_plan_indices(std::size_t samples) noexcept {
  return static_cast<std::uint64_t>(samples) > std::uint64_t{std::numeric_limits<std::uint32_t>::max()} + 1 ||
         wide_for_tests.load(std::memory_order_relaxed);
}

void wide_plan_indices_for_tests(bool wide) noexcept {
  wide_for_tests.store(wide, std::memory_order_relaxed);
}

}  // namespace strider::sampling_detail
