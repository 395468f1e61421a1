#include "strider/sampling/random.hpp"

#include <numeric>
#include <utility>

namespace strider {

namespace {
__extension__ using uint128 = unsigned __int128;
}  // namespace

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n > 0 ? n : 0));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::mt19937 engine(static_cast<std::uint32_t>(seed));  // torch's mt19937 keeps the low 32 bits
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const auto remaining = static_cast<std::uint64_t>(n - i);
    std::uint64_t draw = engine();
    if (remaining > 0xffffffffULL) draw = (draw << 32) | engine();
    const auto z = static_cast<std::int64_t>(draw % remaining);
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(i + z)]);
  }
  return order;
}

std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  if (bound <= 1) return 0;
  // Lemire: multiply-high with rejection of the biased low range.
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

void shuffle_in_place(std::vector<std::int64_t>& values, std::mt19937_64& engine) {
  for (std::size_t i = values.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(uniform_below(engine, i));
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace strider
