// The bucketed plan's window sorts against std::sort: both give the ascending order of distinct
// packed keys, each on the inputs it takes, and the dense sort declines the ones it is not for.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/key_sort.hpp"

namespace strider {
namespace {

struct Window {
  std::vector<std::int64_t> lengths;  // of every index of the dataset
  std::vector<std::uint64_t> keys;    // (length << index_bits | index) of the window's indices
  int index_bits = 0;
};

/// `size` distinct indices of a dataset of `n`, drawn from [first, first + span), with lengths in
/// [1, longest].
Window window_of(std::int64_t n, std::int64_t first, std::int64_t span, std::size_t size, std::int64_t longest,
                 std::uint64_t seed) {
  Window window;
  std::mt19937_64 random(seed);
  window.lengths.resize(static_cast<std::size_t>(n));
  for (std::int64_t& length : window.lengths)
    length = 1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(longest));
  window.index_bits = sampling_detail::bit_width(static_cast<std::uint64_t>(n - 1));
  std::vector<std::int64_t> indices(static_cast<std::size_t>(span));
  std::iota(indices.begin(), indices.end(), first);
  std::shuffle(indices.begin(), indices.end(), random);
  indices.resize(size);
  for (const std::int64_t index : indices)
    window.keys.push_back(static_cast<std::uint64_t>(window.lengths[static_cast<std::size_t>(index)])
                              << window.index_bits |
                          static_cast<std::uint64_t>(index));
  return window;
}

}  // namespace

TEST_CASE("bucketed window sorts: the dense sort and the radix sort order keys as std::sort does", "[bucketed]") {
  struct Case {
    std::int64_t n, first, span;
    std::size_t size;
    std::int64_t longest;
    bool dense;  // sort_dense_keys takes it
  };
  const Case cases[] = {
      {200000, 0, 200000, 13000, 512, true},     // a w3 window: one in 16 of the dataset
      {5000, 0, 5000, 5000, 40, true},           // the whole dataset, many ties
      {100000, 40000, 3000, 3000, 2000, true},   // a dense stretch in the middle of the index range
      {60000, 0, 60000, 512, 8, true},           // the fewest keys it takes, 117 indices a key
      {60000, 0, 60000, 511, 8, false},          // one key fewer
      {1000000, 0, 1000000, 4000, 300, false},   // 250 indices a key: too sparse for a bitmap
      {100000, 0, 100000, 20000, 90000, false},  // lengths spread over 4.5 times as many values as keys
  };
  for (const Case& c : cases) {
    CAPTURE(c.n, c.first, c.span, c.size, c.longest);
    const Window window = window_of(c.n, c.first, c.span, c.size, c.longest, 7);
    std::vector<std::uint64_t> expected = window.keys;
    std::sort(expected.begin(), expected.end());

    std::vector<std::uint64_t> dense = window.keys, spare = {1, 2, 3}, bitmap = {~std::uint64_t{0}};
    std::vector<std::size_t> starts = {9};
    const bool took =
        sampling_detail::sort_dense_keys(dense, window.index_bits, window.lengths.data(), spare, bitmap, starts);
    REQUIRE(took == c.dense);
    REQUIRE(dense == (took ? expected : window.keys));
    // Scratch left by one window does not leak into the next.
    if (took) {
      std::vector<std::uint64_t> again = window.keys;
      REQUIRE(sampling_detail::sort_dense_keys(again, window.index_bits, window.lengths.data(), spare, bitmap, starts));
      REQUIRE(again == expected);
    }

    std::vector<std::uint64_t> radix = window.keys, radix_spare;
    sampling_detail::sort_keys(radix, radix_spare);
    REQUIRE(radix == expected);
  }
}

TEST_CASE("bucketed window sorts: the dense sort's limits, at their edges", "[bucketed]") {
  // 512 keys: indices first, first + 1, ... with the last at first + span - 1, and lengths among
  // L values. The bitmap takes up to 128 indices a key (a span of 128 * 512 + 127 still divides to
  // 512), the counts one length value a key.
  constexpr std::size_t size = 512;
  constexpr std::uint64_t first = 1000;
  const auto keys_of = [&](std::uint64_t span, std::uint64_t length_values, std::vector<std::int64_t>& lengths) {
    lengths.assign(static_cast<std::size_t>(first + span), 1);
    std::vector<std::uint64_t> keys;
    for (std::size_t k = 0; k < size; ++k) {
      const std::uint64_t index = k + 1 == size ? first + span - 1 : first + k;
      // Every one of the L values once (k < L), then any of them; the last key the longest.
      const std::uint64_t length =
          k + 1 == size ? length_values : 1 + (k < length_values ? k : (k * 7) % length_values);
      lengths[static_cast<std::size_t>(index)] = static_cast<std::int64_t>(length);
      keys.push_back(length << 20 | index);
    }
    std::reverse(keys.begin(), keys.end());
    return keys;
  };
  struct Edge {
    std::uint64_t span, length_values;
    bool takes;
  };
  const Edge edges[] = {
      {128 * size + 127, 512, true}, {128 * size + 128, 512, false}, {1000, 512, true}, {1000, 513, false}};
  for (const Edge& edge : edges) {
    CAPTURE(edge.span, edge.length_values);
    std::vector<std::int64_t> lengths;
    std::vector<std::uint64_t> keys = keys_of(edge.span, edge.length_values, lengths);
    const std::vector<std::uint64_t> before = keys;
    std::vector<std::uint64_t> expected = keys, spare, bitmap;
    std::sort(expected.begin(), expected.end());
    std::vector<std::size_t> starts;
    const bool took = sampling_detail::sort_dense_keys(keys, 20, lengths.data(), spare, bitmap, starts);
    REQUIRE(took == edge.takes);
    REQUIRE(keys == (took ? expected : before));
  }
}

TEST_CASE("bucketed window sorts: every window at once, as each window's std::sort with its carries", "[bucketed]") {
  struct Case {
    std::int64_t n, longest, window_tokens;
    std::uint64_t most_windows;
    bool marks;  // mark_windows takes it
  };
  const Case cases[] = {
      {200000, 512, 1 << 20, 64, true},    // w3's windows: about 16 of 13,000 samples
      {5000, 40, 1 << 30, 1, true},        // one window: the epoch
      {5000, 40, 1, 5000, false},          // a window per sample: more (window, length) buckets than N / 4
      {5000, 40, 3000, 40, true},          // windows of about 100 samples, many ties
      {5000, 40, 3000, 10, false},         // more windows than `most_windows` says
      {100000, 90000, 1 << 30, 1, false},  // lengths over more buckets than the cache holds
  };
  for (const Case& c : cases) {
    CAPTURE(c.n, c.longest, c.window_tokens, c.most_windows);
    // A shuffled order of every index's key.
    const Window all = window_of(c.n, 0, c.n, static_cast<std::size_t>(c.n), c.longest, 11);
    const std::vector<std::uint64_t>& order = all.keys;
    // The windows as one would cut them.
    std::vector<std::size_t> ends;
    std::int64_t sum = 0;
    for (std::size_t position = 0; position < order.size(); ++position) {
      sum += static_cast<std::int64_t>(order[position] >> all.index_bits);
      if (sum >= c.window_tokens || position + 1 == order.size()) {
        ends.push_back(position + 1);
        sum = 0;
      }
    }
    const std::int64_t shortest = *std::min_element(all.lengths.begin(), all.lengths.end());
    const std::int64_t longest = *std::max_element(all.lengths.begin(), all.lengths.end());

    sampling_detail::WindowMarks marks;
    marks.order = {7};  // scratch of any content
    marks.window_of = {7};
    const bool took = sampling_detail::mark_windows(order.data(), order.size(), all.index_bits, shortest, longest,
                                                    c.window_tokens, c.most_windows, marks);
    REQUIRE(took == c.marks);
    if (!took) continue;
    REQUIRE(marks.ends == ends);
    // The same marks from 32-bit keys, ((length - shortest) << index_bits | index), marked in
    // marks.order's own words, where they fit.
    if (all.index_bits + sampling_detail::bit_width(static_cast<std::uint64_t>(longest - shortest)) <= 32) {
      sampling_detail::WindowMarks narrow;
      narrow.order.resize(order.size());
      const std::uint64_t index_mask = (std::uint64_t{1} << all.index_bits) - 1;
      for (std::size_t position = 0; position < order.size(); ++position)
        narrow.order[position] = static_cast<std::uint32_t>(
            ((order[position] >> all.index_bits) - static_cast<std::uint64_t>(shortest)) << all.index_bits |
            (order[position] & index_mask));
      REQUIRE(sampling_detail::mark_windows(narrow.order.data(), order.size(), all.index_bits, shortest, longest,
                                            c.window_tokens, c.most_windows, narrow));
      REQUIRE(narrow.ends == marks.ends);
      REQUIRE(narrow.places == marks.places);
      REQUIRE(std::equal(narrow.order.begin(), narrow.order.end(), marks.order.begin(), marks.order.end()));
    }

    // Each window but the last carries on some of its last samples: none, a few, or all of them
    // (which then carry on through the next window too).
    std::mt19937_64 random(5);
    std::vector<std::vector<std::size_t>> packed_counts;
    std::vector<std::size_t> carried, firsts;
    const auto span = static_cast<std::size_t>(marks.lengths);
    REQUIRE(sampling_detail::place_windows(marks, [&](const std::size_t* counts, bool last, std::size_t first) {
      packed_counts.emplace_back(counts, counts + span);
      firsts.push_back(first);
      const std::size_t size = std::accumulate(counts, counts + span, std::size_t{0});
      const std::uint64_t pick = random() % 4;
      carried.push_back(last || pick == 0 ? 0 : pick == 1 ? size : static_cast<std::size_t>(random() % (size / 8 + 1)));
      return carried.back();
    }));
    REQUIRE(carried.size() == ends.size());

    // As one would do it: each window's samples and those carried in, sorted, less the last ones.
    std::vector<std::int64_t> expected;
    std::vector<std::uint64_t> carry;
    for (std::size_t window = 0, begin = 0; window < ends.size(); begin = ends[window++]) {
      std::vector<std::uint64_t> merged = carry;
      merged.insert(merged.end(), order.begin() + static_cast<std::ptrdiff_t>(begin),
                    order.begin() + static_cast<std::ptrdiff_t>(ends[window]));
      std::sort(merged.begin(), merged.end());
      std::vector<std::size_t> counts(span, 0);
      for (const std::uint64_t key : merged)
        ++counts[static_cast<std::size_t>((key >> all.index_bits) - static_cast<std::uint64_t>(shortest))];
      REQUIRE(packed_counts[window] == counts);
      REQUIRE(firsts[window] == expected.size());
      const std::size_t staying = merged.size() - carried[window];
      for (std::size_t k = 0; k < staying; ++k)
        expected.push_back(static_cast<std::int64_t>(merged[k] & ((std::uint64_t{1} << all.index_bits) - 1)));
      carry.assign(merged.begin() + static_cast<std::ptrdiff_t>(staying), merged.end());
    }
    REQUIRE(expected.size() == order.size());

    sampling_detail::WindowMarks placed = marks;
    std::vector<std::int64_t> dealt(order.size(), -1);
    REQUIRE(sampling_detail::deal_windows(dealt.data(), all.lengths.data(), marks));
    // The first place they differ, not all N indices (printing them takes minutes).
    const auto differ = std::mismatch(dealt.begin(), dealt.end(), expected.begin()).first - dealt.begin();
    REQUIRE(differ == static_cast<std::ptrdiff_t>(dealt.size()));

    // The deal's first step taken a slice at a time beforehand, as a rank waiting for another's plan
    // takes it, in part or whole, slices ending inside windows and at their ends: the same deal.
    for (const std::size_t slice : {std::size_t{1}, std::size_t{4099}, marks.ends.front(), order.size()}) {
      for (const std::size_t slices : {std::size_t{1}, std::size_t{3}}) {
        CAPTURE(slice, slices);
        sampling_detail::WindowMarks sliced = placed;
        bool left = true;
        for (std::size_t k = 0; k < slices && left; ++k) left = sampling_detail::mark_positions(sliced, slice);
        REQUIRE(sliced.marked == std::min(order.size(), slice * slices));
        REQUIRE(left == (sliced.marked < order.size()));
        std::vector<std::int64_t> again(order.size(), -1);
        REQUIRE(sampling_detail::deal_windows(again.data(), all.lengths.data(), sliced));
        REQUIRE(std::mismatch(again.begin(), again.end(), expected.begin()).first == again.end());
      }
    }

    // Lengths that are not the marks': a sample longer than any carries on past the last window.
    std::vector<std::int64_t> other = all.lengths;
    other[other.size() / 2] = longest + 1;
    REQUIRE_FALSE(sampling_detail::deal_windows(dealt.data(), other.data(), placed));
  }
}

}  // namespace strider
