// The decompressed-chunk cache simulated from the plan (pipeline_detail::count_chunk_decompressions):
// no cache is what --lookahead does (each window's distinct chunks once), and with a cache the
// count is the least any cache of that size achieves (checked against an exhaustive search).
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "pipeline/lookahead.hpp"

using strider::pipeline_detail::count_chunk_decompressions;

namespace {

using Windows = std::vector<std::vector<std::int64_t>>;

/// The fewest decompressions any cache of `capacity` chunks achieves: every choice of what to keep
/// after each use, tried (small cases only: chunks < 16).
std::int64_t exhaustive(const std::vector<std::int64_t>& uses, std::size_t at, std::uint32_t cached, int capacity,
                        std::map<std::pair<std::size_t, std::uint32_t>, std::int64_t>& memo) {
  if (at == uses.size()) return 0;
  const auto key = std::make_pair(at, cached);
  if (const auto found = memo.find(key); found != memo.end()) return found->second;
  const std::uint32_t bit = 1U << uses[at];
  const std::int64_t cost = (cached & bit) ? 0 : 1;
  const std::uint32_t with = cached | bit;
  std::int64_t best = cost + exhaustive(uses, at + 1, cached & ~bit, capacity, memo);  // not kept
  if (__builtin_popcount(with) <= capacity)
    best = std::min(best, cost + exhaustive(uses, at + 1, with, capacity, memo));
  for (std::uint32_t other = with & ~bit; other != 0; other &= other - 1) {  // kept, another evicted
    const std::uint32_t evicted = with & ~(other & (~other + 1));
    if (__builtin_popcount(evicted) <= capacity)
      best = std::min(best, cost + exhaustive(uses, at + 1, evicted, capacity, memo));
  }
  memo[key] = best;
  return best;
}

std::int64_t exhaustive(const Windows& windows, int capacity) {
  std::vector<std::int64_t> uses;
  for (std::vector<std::int64_t> window : windows) {  // each window's distinct chunks, as the reader reads them
    std::sort(window.begin(), window.end());
    window.erase(std::unique(window.begin(), window.end()), window.end());
    uses.insert(uses.end(), window.begin(), window.end());
  }
  std::map<std::pair<std::size_t, std::uint32_t>, std::int64_t> memo;
  return exhaustive(uses, 0, 0, capacity, memo);
}

}  // namespace

TEST_CASE("chunk cache: no cache decompresses each window's distinct chunks once", "[lookahead]") {
  const Windows windows = {{3, 1, 3, 2}, {1, 1}, {}, {2, 5, 3}};
  CHECK(count_chunk_decompressions(windows, 0) == 3 + 1 + 0 + 3);
  // A cache as large as the distinct chunks: each decompressed once.
  CHECK(count_chunk_decompressions(windows, 4) == 4);
  CHECK(count_chunk_decompressions(windows, 100) == 4);
  CHECK(count_chunk_decompressions({}, 8) == 0);
}

TEST_CASE("chunk cache: sweeps over every chunk save about the cache's size per window", "[lookahead]") {
  // What a shuffled plan's windows look like: each touches every chunk, in chunk order.
  Windows windows(5);
  for (auto& window : windows)
    for (std::int64_t chunk = 0; chunk < 10; ++chunk) window.push_back(chunk);
  CHECK(count_chunk_decompressions(windows, 0) == 50);
  // A cyclic sweep of 10 chunks with 4 cached: 10 the first time, then 10 - 4 per pass.
  CHECK(count_chunk_decompressions(windows, 4) == 10 + 4 * 6);
  CHECK(count_chunk_decompressions(windows, 4) == exhaustive(windows, 4));
}

TEST_CASE("chunk cache: the farthest next use is evicted (the fewest decompressions)", "[lookahead]") {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int chunks = 3 + static_cast<int>(random() % 5);
    Windows windows(2 + random() % 4);
    for (auto& window : windows) {
      const std::size_t size = random() % 5;
      for (std::size_t k = 0; k < size; ++k) window.push_back(static_cast<std::int64_t>(random() % chunks));
    }
    for (int capacity = 0; capacity <= 3; ++capacity) {
      INFO("trial " << trial << ", capacity " << capacity);
      CHECK(count_chunk_decompressions(windows, capacity) == exhaustive(windows, capacity));
    }
  }
}
