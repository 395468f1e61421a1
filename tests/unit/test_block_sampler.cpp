// The block sampler: invariants, exact coverage, locality of reads, 64-bit sizes, errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <tuple>

#include "sampler_properties.hpp"
#include "strider/core/error.hpp"
#include "strider/sampling/block_sampler.hpp"
#include "strider/sampling/factory.hpp"

using namespace strider;
using strider::testing::all_batches;

namespace {

BlockSamplerConfig block_config(std::int64_t n, std::int64_t batch, std::int64_t block_size, std::int64_t window,
                                bool drop_last = false, bool shuffle = true) {
  BlockSamplerConfig config;
  config.dataset_size = n;
  config.batch_size = batch;
  config.block_size = block_size;
  config.block_window = window;
  config.drop_last = drop_last;
  config.shuffle = shuffle;
  config.seed = 21;
  return config;
}

std::vector<std::int64_t> rank_epoch(const Sampler& sampler) {
  std::vector<std::int64_t> indices;
  for (const auto& batch : all_batches(sampler)) indices.insert(indices.end(), batch.begin(), batch.end());
  return indices;
}

}  // namespace

TEST_CASE("block sampler: invariants of every mode", "[block]") {
  for (const auto& [n, batch, block_size, window, drop_last, world] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, int>{1000, 16, 32, 2, false, 3},
        {1001, 7, 10, 1, true, 4},
        {50, 4, 100, 8, false, 3},
        {9, 0, 2, 2, false, 4},
        {640, 32, 64, 4, false, 2}}) {
    CAPTURE(n, batch, block_size, window, drop_last, world);
    testing::InvariantOptions options;
    options.world_size = world;
    check_sampler_invariants(
        [&](int world_size, int rank) {
          return std::make_unique<BlockSampler>(block_config(n, batch, block_size, window, drop_last), world_size,
                                                rank);
        },
        options);
  }
}

TEST_CASE("block sampler: exact coverage with the distributed sampler's counts", "[block]") {
  for (std::int64_t n = 1; n <= 400; ++n) {
    const int world = 1 + static_cast<int>(n % 4);
    const bool drop_last = n % 3 == 0;
    const std::int64_t block_size = 1 + n % 9, window = 1 + n % 3;
    CAPTURE(n, world, drop_last, block_size, window);
    std::vector<int> hits(static_cast<std::size_t>(n), 0);
    const std::int64_t per_rank = drop_last ? n / world : (n + world - 1) / world;
    for (int rank = 0; rank < world; ++rank) {
      BlockSampler sampler(block_config(n, 3, block_size, window, drop_last), world, rank);
      sampler.set_epoch(2);
      const auto indices = rank_epoch(sampler);
      REQUIRE(static_cast<std::int64_t>(indices.size()) == per_rank);
      for (std::size_t position = 0; position < indices.size(); ++position) {
        REQUIRE((indices[position] >= 0 && indices[position] < n));
        REQUIRE(sampler.index_at(static_cast<std::int64_t>(position)) == indices[position]);
        ++hits[static_cast<std::size_t>(indices[position])];
      }
    }
    std::int64_t extra = 0, never = 0;
    for (int count : hits) extra += count > 1 ? count - 1 : 0, never += count == 0 ? 1 : 0;
    REQUIRE(extra == (drop_last ? 0 : per_rank * world - n));
    REQUIRE(never == (drop_last ? n - per_rank * world : 0));
  }
}

TEST_CASE("block sampler: reads stay within few blocks, blocks are shuffled", "[block]") {
  const std::int64_t n = 100'000, block_size = 64, window = 2;
  const int world = 4;
  std::set<std::int64_t> first_blocks;
  for (int rank = 0; rank < world; ++rank) {
    BlockSampler sampler(block_config(n, 32, block_size, window), world, rank);
    sampler.set_epoch(1);
    const auto indices = rank_epoch(sampler);
    // Each window of W*S positions touches at most W+1 blocks (the rank's range may split one).
    for (std::size_t start = 0; start < indices.size(); start += window * block_size) {
      std::set<std::int64_t> blocks;
      for (std::size_t k = start; k < std::min(indices.size(), start + window * block_size); ++k)
        blocks.insert(indices[k] / block_size);
      REQUIRE(blocks.size() <= static_cast<std::size_t>(window + 1));
    }
    first_blocks.insert(indices[0] / block_size);
    // Shuffled within the window: not in dataset order.
    std::int64_t ascending = 0;
    for (std::size_t k = 1; k < indices.size(); ++k) ascending += indices[k] == indices[k - 1] + 1 ? 1 : 0;
    REQUIRE(ascending < static_cast<std::int64_t>(indices.size()) / 20);
  }
  REQUIRE(first_blocks.size() == world);
  // The blocks are drawn again every epoch: with one block per window and a batch of one block,
  // step 0 reads one block, which over 8 epochs is (all but surely) not always the same of the 1562.
  std::set<std::int64_t> epoch_first_blocks;
  for (std::int64_t epoch = 0; epoch < 8; ++epoch) {
    BlockSampler sampler(block_config(n, block_size, block_size, 1), 1, 0);
    sampler.set_epoch(epoch);
    std::vector<std::int64_t> step0;
    sampler.batch(0, step0);
    std::set<std::int64_t> blocks;
    for (std::int64_t index : step0) blocks.insert(index / block_size);
    REQUIRE(blocks.size() == 1u);
    epoch_first_blocks.insert(*blocks.begin());
  }
  REQUIRE(epoch_first_blocks.size() >= 4u);
  // Without shuffle, rank r reads the contiguous range [r*M, (r+1)*M).
  BlockSampler ordered(block_config(n, 32, block_size, window, false, false), world, 2);
  const auto indices = rank_epoch(ordered);
  for (std::size_t k = 0; k < indices.size(); ++k) REQUIRE(indices[k] == 2 * n / world + static_cast<std::int64_t>(k));
}

TEST_CASE("block sampler: no 32-bit truncation for N > 2^32", "[block]") {
  const std::int64_t n = (std::int64_t{1} << 40) + 5;
  const int world = 8;
  BlockSampler sampler(block_config(n, 4, 4096, 16), world, 7);
  sampler.set_epoch(3);
  REQUIRE(sampler.samples_per_rank() == n / world + 1);
  std::vector<std::int64_t> indices;
  std::set<std::int64_t> distinct;
  for (const std::int64_t step : {std::int64_t{0}, sampler.num_steps() / 2, sampler.num_steps() - 1}) {
    sampler.batch(step, indices);
    for (std::int64_t index : indices) {
      REQUIRE((index >= 0 && index < n));
      distinct.insert(index);
    }
  }
  REQUIRE(distinct.size() == 9);  // 4 + 4 + the last step's single sample
  REQUIRE(*distinct.rbegin() > 0xffffffffLL);
  BlockSampler resumed(block_config(n, 4, 4096, 16), world, 7);
  REQUIRE(resumed.resume(sampler.state(sampler.num_steps() - 1)) == sampler.num_steps() - 1);
}

TEST_CASE("block sampler: errors and no elastic resume", "[block][errors]") {
  REQUIRE_THROWS_WITH(BlockSampler(block_config(10, 2, 0, 2), 1, 0), Catch::Contains("block_size must be >= 1"));
  REQUIRE_THROWS_WITH(BlockSampler(block_config(10, 2, 4, 0), 1, 0), Catch::Contains("block_window must be >= 1"));
  BlockSampler four(block_config(1000, 4, 16, 2), 4, 0);
  BlockSampler two(block_config(1000, 8, 16, 2), 2, 0);
  REQUIRE_THROWS_AS(two.resume(four.state(3)), UsageError);
  REQUIRE_THROWS_WITH(two.resume(four.state(3)), Catch::Contains("resumes only at the one it was saved at"));
}

TEST_CASE("block sampler: blocks in storage order give each rank its own range (DLIO's local shuffle)", "[block]") {
  // Through make_sampler as strider-bench --shuffle local asks: block_size 0, blocks not shuffled.
  SamplerOptions options;
  options.mode = "block";
  options.dataset_size = 1003;  // M = ceil(1003 / 4) = 251: the last rank's range wraps by 1
  options.batch_size = 16;
  options.seed = 9;
  options.shuffle_blocks = false;
  const int ranks = 4;
  const std::int64_t m = 251;
  std::vector<std::int64_t> previous;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int rank = 0; rank < ranks; ++rank) {
      std::unique_ptr<Sampler> sampler = make_sampler(options, ranks, rank);
      sampler->set_epoch(epoch);
      std::vector<std::int64_t> indices = rank_epoch(*sampler);
      REQUIRE(static_cast<std::int64_t>(indices.size()) == m);
      std::vector<std::int64_t> own;
      for (std::int64_t k = 0; k < m; ++k) own.push_back((rank * m + k) % 1003);
      const std::vector<std::int64_t> order = indices;
      std::sort(indices.begin(), indices.end());
      std::sort(own.begin(), own.end());
      CHECK(indices == own);  // the same range every epoch
      CHECK(order != own);    // shuffled inside
      if (rank == 0) {
        CHECK(order != previous);  // another order each epoch
        previous = order;
      }
    }
  }
  // The configuration is its own: a checkpoint of the global block order does not resume it.
  SamplerOptions global = options;
  global.shuffle_blocks = true;
  global.block_size = m;
  global.block_window = 1;
  CHECK(make_sampler(options, ranks, 0)->config_hash() != make_sampler(global, ranks, 0)->config_hash());
}
