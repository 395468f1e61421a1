// The streaming sampler and its Feistel permutation: exact coverage, invariants, 64-bit sizes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <set>
#include <tuple>

#include "sampler_properties.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/feistel_permutation.hpp"
#include "strider/sampling/random.hpp"
#include "strider/sampling/streaming_sampler.hpp"

using namespace strider;
using strider::testing::all_batches;

namespace {

StreamingSamplerConfig streaming_config(std::int64_t n, std::int64_t batch, std::int64_t seed, bool drop_last = false,
                                        bool shuffle = true) {
  StreamingSamplerConfig config;
  config.dataset_size = n;
  config.batch_size = batch;
  config.seed = seed;
  config.drop_last = drop_last;
  config.shuffle = shuffle;
  return config;
}

// Marks every image of the permutation of [0, n); true when each index is hit exactly once.
bool is_bijection(std::uint64_t n, std::uint64_t key) {
  const FeistelPermutation permutation(n, key);
  std::vector<bool> seen(n, false);
  for (std::uint64_t position = 0; position < n; ++position) {
    const std::uint64_t image = permutation(position);
    if (image >= n || seen[image]) return false;
    seen[image] = true;
  }
  return true;
}

// Every rank's epoch, marked: each index is hit once, padding adds exactly the first total-N
// positions of the order again (drop_last: exactly the first total positions are hit).
void check_exact_coverage(std::int64_t n, int world, bool drop_last, std::int64_t seed) {
  std::vector<std::uint8_t> hits(static_cast<std::size_t>(n), 0);
  std::int64_t samples = 0;
  std::vector<std::int64_t> indices;
  for (int rank = 0; rank < world; ++rank) {
    StreamingSampler sampler(streaming_config(n, 7, seed, drop_last), world, rank);
    sampler.set_epoch(3);
    for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
      sampler.batch(step, indices);
      for (std::int64_t index : indices) {
        REQUIRE((index >= 0 && index < n));
        ++hits[static_cast<std::size_t>(index)];
        ++samples;
      }
    }
  }
  const std::int64_t per_rank = drop_last ? n / world : (n + world - 1) / world;
  REQUIRE(samples == per_rank * world);
  std::int64_t twice = 0, never = 0;
  for (std::uint8_t count : hits) {
    REQUIRE(count <= (n < world ? world : 2));
    twice += count >= 2 ? count - 1 : 0;
    never += count == 0 ? 1 : 0;
  }
  REQUIRE(twice == (drop_last ? 0 : per_rank * world - n));
  REQUIRE(never == (drop_last ? n - per_rank * world : 0));
}

}  // namespace

TEST_CASE("Feistel permutation is a bijection for every size up to 3000", "[streaming][feistel]") {
  for (std::uint64_t n = 0; n <= 3000; ++n) {
    CAPTURE(n);
    REQUIRE(is_bijection(n, derive_seed(7, static_cast<std::int64_t>(n), 1)));
  }
}

TEST_CASE("Feistel permutation: tweaks give other bijections, keys other orders", "[streaming][feistel]") {
  const FeistelPermutation permutation(1000, 42);
  std::vector<bool> seen(1000, false);
  int moved = 0;
  for (std::uint64_t position = 0; position < 1000; ++position) {
    const std::uint64_t image = permutation(position, 5);
    REQUIRE(image < 1000);
    REQUIRE_FALSE(seen[image]);
    seen[image] = true;
    moved += image != permutation(position) ? 1 : 0;
  }
  REQUIRE(moved > 900);
  const FeistelPermutation other(1000, 43);
  int same = 0;
  for (std::uint64_t position = 0; position < 1000; ++position)
    same += permutation(position) == other(position) ? 1 : 0;
  REQUIRE(same < 20);
}

TEST_CASE("Feistel permutation: the first position is uniform over keys (chi-square)", "[streaming][feistel]") {
  // N = 10, 20000 keys: each index should be first ~2000 times; chi-square with 9 dof < 30.
  constexpr int n = 10, keys = 20000;
  std::vector<double> first(n, 0), second(n, 0);
  for (int key = 0; key < keys; ++key) {
    const FeistelPermutation permutation(n, derive_seed(1, key, 2));
    ++first[permutation(0)];
    ++second[permutation(7)];
  }
  double chi_first = 0, chi_second = 0;
  const double expected = static_cast<double>(keys) / n;
  for (int index = 0; index < n; ++index) {
    chi_first += (first[index] - expected) * (first[index] - expected) / expected;
    chi_second += (second[index] - expected) * (second[index] - expected) / expected;
  }
  REQUIRE(chi_first < 30);
  REQUIRE(chi_second < 30);
}

TEST_CASE("streaming sampler: exact coverage for every N up to 3000", "[streaming]") {
  for (std::int64_t n = 1; n <= 3000; ++n) {
    CAPTURE(n);
    check_exact_coverage(n, 1 + static_cast<int>(n % 5), n % 3 == 0, n);
  }
}

TEST_CASE("Feistel permutation: permute() in bulk equals operator() one by one", "[streaming][feistel]") {
  for (const std::uint64_t n : {1ULL, 2ULL, 3ULL, 1000ULL, 1025ULL, (1ULL << 40) + 1, (1ULL << 63) - 1}) {
    CAPTURE(n);
    const FeistelPermutation permutation(n, 77);
    std::vector<std::int64_t> values(700);
    for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<std::int64_t>((k * 7919) % n);
    const std::vector<std::int64_t> positions = values;
    permutation.permute(values.data(), values.size(), 3);
    for (std::size_t k = 0; k < values.size(); ++k)
      REQUIRE(values[k] == static_cast<std::int64_t>(permutation(static_cast<std::uint64_t>(positions[k]), 3)));
  }
}

TEST_CASE("Feistel permutation: permute() of every position is a bijection for every size up to 2000",
          "[streaming][feistel]") {
  // permute() walks its cycles in passes of its own; every size and both tweak paths, against the
  // image test above (each index once) and operator() one by one.
  std::vector<std::int64_t> values;
  for (std::uint64_t n = 0; n <= 2000; ++n) {
    const FeistelPermutation permutation(n, derive_seed(9, static_cast<std::int64_t>(n), 4));
    for (const std::uint64_t tweak : {std::uint64_t{0}, n + 1}) {
      CAPTURE(n, tweak);
      values.resize(n);
      for (std::uint64_t k = 0; k < n; ++k) values[k] = static_cast<std::int64_t>(k);
      permutation.permute(values.data(), values.size(), tweak);
      std::vector<bool> seen(n, false);
      bool bijection = true, same = true;
      for (std::uint64_t k = 0; k < n; ++k) {
        const auto image = static_cast<std::uint64_t>(values[k]);
        bijection = bijection && image < n && !seen[image];
        if (image < n) seen[image] = true;
        same = same && image == permutation(k, tweak);
      }
      REQUIRE(bijection);
      REQUIRE(same);
    }
  }
}

TEST_CASE("streaming permutation: exact coverage for 310 random N of every bit width up to 1e7", "[streaming][slow]") {
  // 300 sizes of a bit width drawn uniformly from 1 to 24 (the cycle walking's edges lie at every
  // power of two, each width as often), then 10 drawn uniformly from the top half of 1e7.
  std::mt19937_64 engine(12345);
  std::vector<std::int64_t> chunk(4096);
  constexpr std::uint64_t largest = 10'000'000;
  for (int trial = 0; trial < 310; ++trial) {
    std::uint64_t low = largest / 2, high = largest;  // n in [low, high]
    if (trial < 300) {
      const int bits = 1 + static_cast<int>(uniform_below(engine, 24));
      low = std::uint64_t{1} << (bits - 1);
      high = std::min((std::uint64_t{1} << bits) - 1, largest);
    }
    const std::uint64_t n = low + uniform_below(engine, high - low + 1);
    CAPTURE(n);
    const FeistelPermutation permutation(n, engine());
    std::vector<bool> seen(n, false);
    std::uint64_t hits = 0;
    for (std::uint64_t first = 0; first < n; first += chunk.size()) {
      const std::size_t count = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), n - first));
      for (std::size_t k = 0; k < count; ++k) chunk[k] = static_cast<std::int64_t>(first + k);
      permutation.permute(chunk.data(), count);
      for (std::size_t k = 0; k < count; ++k) {
        const auto image = static_cast<std::uint64_t>(chunk[k]);
        if (image < n && !seen[image]) seen[image] = true, ++hits;
      }
    }
    REQUIRE(hits == n);  // n distinct images in [0, n): a bijection
  }
}

TEST_CASE("streaming sampler: distributed invariants", "[streaming]") {
  for (const auto& [n, batch, drop_last, world] : {std::tuple<std::int64_t, std::int64_t, bool, int>{100, 8, false, 3},
                                                   {101, 5, true, 4},
                                                   {7, 2, false, 3},
                                                   {5, 0, false, 8},
                                                   {1000, 16, false, 2}}) {
    CAPTURE(n, batch, drop_last, world);
    testing::InvariantOptions options;
    options.world_size = world;
    options.epoch_sensitive = n > 5;
    check_sampler_invariants(
        [&](int world_size, int rank) {
          return std::make_unique<StreamingSampler>(streaming_config(n, batch, 11, drop_last), world_size, rank);
        },
        options);
  }
}

TEST_CASE("streaming sampler: global batches do not depend on the world size", "[streaming]") {
  auto make_for = [](std::int64_t batch) {
    return [batch](int world, int rank) {
      return std::make_unique<StreamingSampler>(streaming_config(240, batch, 3), world, rank);
    };
  };
  const auto two = testing::global_batches(make_for(12), 2, 1);
  REQUIRE(two == testing::global_batches(make_for(8), 3, 1));
  REQUIRE(two == testing::global_batches(make_for(6), 4, 1));
}

TEST_CASE("streaming sampler: without shuffle it is the distributed sampler's unshuffled order", "[streaming]") {
  DistributedSamplerConfig distributed;
  distributed.dataset_size = 103;
  distributed.batch_size = 4;
  distributed.shuffle = false;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler expected(distributed, 4, rank);
    StreamingSampler sampler(streaming_config(103, 4, 0, false, false), 4, rank);
    REQUIRE(all_batches(sampler) == all_batches(expected));
  }
}

TEST_CASE("streaming sampler: no 32-bit truncation for N > 2^32, up to 2^63 - 1", "[streaming]") {
  for (const std::int64_t n :
       {(std::int64_t{1} << 40) + 3, std::int64_t{10'000'000'000}, std::numeric_limits<std::int64_t>::max()}) {
    CAPTURE(n);
    const int world = 8;
    StreamingSampler sampler(streaming_config(n, 4, 9), world, 3);
    sampler.set_epoch(2);
    const std::int64_t per_rank = n / world + (n % world != 0 ? 1 : 0);
    REQUIRE(sampler.samples_per_rank() == per_rank);
    REQUIRE(sampler.num_steps() == per_rank / 4 + (per_rank % 4 != 0 ? 1 : 0));
    std::vector<std::int64_t> indices;
    sampler.batch(sampler.num_steps() - 1, indices);
    for (std::int64_t index : indices) REQUIRE((index >= 0 && index < n));
    // Positions near the start, the middle and the end map to distinct indices spread over [0, N).
    std::set<std::int64_t> distinct;
    std::int64_t above_32_bits = 0;
    for (std::int64_t position : {std::int64_t{0}, std::int64_t{1}, per_rank / 2, per_rank - 2, per_rank - 1}) {
      for (std::int64_t offset = 0; offset < 200 && position + offset < per_rank; ++offset) {
        const std::int64_t index = sampler.index_at(position + offset);
        REQUIRE((index >= 0 && index < n));
        distinct.insert(index);
        above_32_bits += index > 0xffffffffLL ? 1 : 0;
      }
    }
    REQUIRE(distinct.size() == 403);  // positions 0..200, 200 from the middle, the last two
    REQUIRE(above_32_bits > 150);     // N >= 1e10: more than half of [0, N) lies above 2^32
    // Resume in O(1) at a step far beyond 2^32 samples.
    const std::int64_t far_step = sampler.num_steps() - 3;
    const SamplerState saved = sampler.state(far_step);
    REQUIRE(static_cast<std::uint64_t>(saved.consumed) ==
            std::min<std::uint64_t>(static_cast<std::uint64_t>(far_step) * 4 * world,
                                    std::numeric_limits<std::int64_t>::max()));
    StreamingSampler resumed(streaming_config(n, 4, 9), world, 3);
    REQUIRE(resumed.resume(saved) == far_step);
    std::vector<std::int64_t> again;
    resumed.batch(far_step, again);
    sampler.batch(far_step, indices);
    REQUIRE(again == indices);
  }
}
