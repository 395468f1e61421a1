#include "strider/sampling/random.hpp"

#include <numeric>
#include <utility>

#include "sampling/block_mt19937.hpp"
#include "sampling/seeded_shuffle.hpp"

namespace strider {

namespace {
__extension__ using uint128 = unsigned __int128;
}  // namespace

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> order;
  torch_randperm(n, seed, order);
  return order;
}

void torch_randperm(std::int64_t n, std::uint64_t seed, std::vector<std::int64_t>& order) {
  order.resize(static_cast<std::size_t>(n > 0 ? n : 0));
  torch_randperm(n, seed, order.data());
}

void torch_randperm(std::int64_t n, std::uint64_t seed, std::int64_t* order) {
  if (n <= 0) return;
  std::iota(order, order + n, std::int64_t{0});
  sampling_detail::BlockMt19937 engine(static_cast<std::uint32_t>(seed));  // torch's mt19937 keeps the low 32 bits
  // The swap partner of step i, i + draw % (n - i). Draws are independent of the order, so the
  // partners are drawn kAhead steps early and their entries prefetched: each is a random access
  // into an array of n entries, a cache miss once n outgrows the cache.
  const auto partner = [&](std::int64_t i) {
    const auto remaining = static_cast<std::uint64_t>(n - i);
    if (remaining > 0xffffffffULL) {
      const std::uint64_t high = engine();
      return i + static_cast<std::int64_t>(((high << 32) | engine()) % remaining);
    }
    return i + static_cast<std::int64_t>(engine() % static_cast<std::uint32_t>(remaining));  // 32-bit division
  };
  constexpr std::int64_t kAhead = 16;
  std::int64_t partners[kAhead];
  const std::int64_t steps = n - 1;  // i in [0, n - 1)
  std::int64_t drawn = 0;
  const auto draw_next = [&] {
    const std::int64_t at = partner(drawn);
    partners[drawn % kAhead] = at;
    __builtin_prefetch(&order[at], 1);
    ++drawn;
  };
  while (drawn < std::min(kAhead, steps)) draw_next();
  for (std::int64_t i = 0; i < steps; ++i) {
    const std::int64_t at = partners[i % kAhead];
    if (drawn < steps) draw_next();
    std::swap(order[i], order[at]);
  }
}

namespace {

// Lemire: multiply-high with rejection of the biased low range. Inlined into the shuffle's loop (a
// call to the exported function would go through the library's PLT for every entry).
template <typename Engine>
inline std::uint64_t draw_below(Engine& engine, std::uint64_t bound) {
  static_assert(sizeof(engine()) == 8, "draw_below takes 64-bit words");
  if (bound <= 1) return 0;
  std::uint64_t x = engine();
  uint128 product = static_cast<uint128>(x) * bound;
  auto low = static_cast<std::uint64_t>(product);
  if (low < bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      x = engine();
      product = static_cast<uint128>(x) * bound;
      low = static_cast<std::uint64_t>(product);
    }
  }
  return static_cast<std::uint64_t>(product >> 64);
}

template <typename Engine, typename T>
void fisher_yates(T* values, std::size_t n, Engine& engine) {
  for (std::size_t i = n; i > 1; --i) {
    const auto j = static_cast<std::size_t>(draw_below(engine, i));
    std::swap(values[i - 1], values[j]);
  }
}

template <typename T>
void shuffle_with_block_engine(T* values, std::size_t n, std::uint64_t seed) {
  sampling_detail::BlockMt19937_64 engine(seed);
  sampling_detail::BlockMt19937_64::Drawer draw(engine);
  fisher_yates(values, n, draw);
}

}  // namespace

std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  return draw_below(engine, bound);
}

void shuffle_in_place(std::vector<std::int64_t>& values, std::mt19937_64& engine) {
  fisher_yates(values.data(), values.size(), engine);
}

namespace sampling_detail {

void shuffle_seeded(std::int64_t* values, std::size_t n, std::uint64_t seed) {
  shuffle_with_block_engine(values, n, seed);
}

void shuffle_seeded(std::uint64_t* values, std::size_t n, std::uint64_t seed) {
  shuffle_with_block_engine(values, n, seed);
}

void shuffle_seeded(std::uint32_t* values, std::size_t n, std::uint64_t seed) {
  shuffle_with_block_engine(values, n, seed);
}

}  // namespace sampling_detail

}  // namespace strider
