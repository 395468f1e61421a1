// The distributed sampler: PyTorch's goldens, invariants, padding, elastic resume, 64-bit sizes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>

#include "sampler_properties.hpp"
#include "sampling/block_mt19937.hpp"
#include "sampling/seeded_shuffle.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/random.hpp"

using namespace strider;
using strider::testing::all_batches;

namespace {

std::vector<std::int64_t> whole_epoch(const Sampler& sampler) {
  std::vector<std::int64_t> indices;
  for (const auto& batch : all_batches(sampler)) indices.insert(indices.end(), batch.begin(), batch.end());
  return indices;
}

DistributedSamplerConfig config_of(std::int64_t n, std::int64_t batch, bool shuffle, bool drop_last, std::int64_t seed,
                                   bool drop_last_batch = false) {
  DistributedSamplerConfig config;
  config.dataset_size = n;
  config.batch_size = batch;
  config.shuffle = shuffle;
  config.drop_last = drop_last;
  config.seed = seed;
  config.drop_last_batch = drop_last_batch;
  return config;
}

}  // namespace

TEST_CASE("torch randperm and DistributedSampler goldens from PyTorch 1.13.1", "[distributed][torch]") {
  std::ifstream file(STRIDER_TEST_DATA_DIR "/torch_distributed_goldens.txt");
  REQUIRE(file.good());
  std::string line;
  int sampler_lines = 0, randperm_lines = 0, listed = 0;
  std::vector<std::int64_t> reused;  // one vector for every randperm line: grown and shrunk, stale values in it
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    CAPTURE(line);
    std::istringstream fields(line);
    const std::size_t colon = line.find(" :");
    REQUIRE(colon != std::string::npos);
    std::vector<std::int64_t> expected_list;
    std::istringstream list_text(line.substr(colon + 2));
    for (std::int64_t value; list_text >> value;) expected_list.push_back(value);

    if (line.rfind("randperm", 0) == 0) {
      std::string word;
      std::int64_t n = 0;
      std::string seed_text;
      fields >> word >> n >> seed_text;
      const std::uint64_t seed =
          seed_text[0] == '-' ? static_cast<std::uint64_t>(std::stoll(seed_text)) : std::stoull(seed_text);
      REQUIRE(torch_randperm(n, seed) == expected_list);
      torch_randperm(n, seed, reused);
      REQUIRE(reused == expected_list);
      ++randperm_lines;
      continue;
    }
    std::int64_t n = 0, seed = 0, epoch = 0, count = 0;
    int world = 0, rank = 0, shuffle = 0, drop_last = 0;
    std::string fnv_word, hex;
    fields >> n >> world >> rank >> seed >> epoch >> shuffle >> drop_last >> count >> fnv_word >> hex;
    REQUIRE(fnv_word == "fnv");
    DistributedSampler sampler(config_of(n, 0, shuffle != 0, drop_last != 0, seed), world, rank);
    sampler.set_epoch(epoch);
    const auto indices = whole_epoch(sampler);
    REQUIRE(static_cast<std::int64_t>(indices.size()) == count);
    Fnv1a64 hash;
    for (std::int64_t index : indices) hash.add(index);
    REQUIRE(hash.value() == std::stoull(hex, nullptr, 16));
    if (n <= 300) {
      REQUIRE(indices == expected_list);
      ++listed;
    }
    ++sampler_lines;
  }
  CHECK(randperm_lines >= 20);
  CHECK(sampler_lines >= 2000);
  CHECK(listed >= 1000);
}

TEST_CASE("a sampler planning epoch after epoch gives each epoch's order as a new sampler does", "[distributed]") {
  // set_epoch reuses the order's memory: nothing of the previous epoch's order may show.
  DistributedSampler reused(config_of(1000, 0, true, false, 7), 3, 1);
  for (std::int64_t epoch : {0, 1, 2, 5, 1, 0}) {
    CAPTURE(epoch);
    DistributedSampler fresh(config_of(1000, 0, true, false, 7), 3, 1);
    fresh.set_epoch(epoch);
    reused.set_epoch(epoch);
    REQUIRE(whole_epoch(reused) == whole_epoch(fresh));
  }
}

TEST_CASE("the design's golden: N=10, R=3, seed 0, epoch 1", "[distributed][torch]") {
  const std::vector<std::vector<std::int64_t>> expected = {{5, 2, 9, 4}, {6, 0, 3, 5}, {1, 8, 7, 6}};
  for (int rank = 0; rank < 3; ++rank) {
    DistributedSampler sampler(config_of(10, 0, true, false, 0), 3, rank);
    sampler.set_epoch(1);
    REQUIRE(whole_epoch(sampler) == expected[rank]);
  }
  REQUIRE(torch_randperm(10, 0) == std::vector<std::int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
}

TEST_CASE("distributed sampler invariants", "[distributed][invariants]") {
  struct Case {
    std::int64_t n, batch;
    int world;
    bool shuffle, drop_last, drop_last_batch;
  };
  const std::vector<Case> cases = {{100, 4, 3, true, false, false},   {100, 4, 3, true, true, false},
                                   {101, 5, 4, true, false, true},    {7, 2, 3, false, false, false},
                                   {1000, 16, 2, true, false, false}, {5, 1, 7, true, false, false},
                                   {64, 0, 4, true, false, false}};
  for (const Case& c : cases) {
    CAPTURE(c.n, c.batch, c.world, c.shuffle, c.drop_last, c.drop_last_batch);
    const auto make = [&](int world, int rank) -> std::unique_ptr<Sampler> {
      return std::make_unique<DistributedSampler>(
          config_of(c.n, c.batch, c.shuffle, c.drop_last, -42, c.drop_last_batch), world, rank);
    };
    strider::testing::InvariantOptions options;
    options.world_size = c.world;
    options.epoch_sensitive = c.shuffle && c.n > 2;
    strider::testing::check_sampler_invariants(make, options);

    // Coverage and disjointness: every index at least once; duplicates are exactly the padding. The
    // epoch holds R * ceil(N/R) samples (R * floor(N/R) with drop_last), written out here.
    if (!c.drop_last_batch) {
      const std::int64_t per_rank = c.drop_last ? c.n / c.world : (c.n + c.world - 1) / c.world;
      const std::int64_t epoch_total = per_rank * c.world;
      const auto counts = strider::testing::index_counts(make, c.world, 1);
      std::int64_t total = 0, distinct = 0;
      for (const auto& [index, count] : counts) {
        REQUIRE(index >= 0);
        REQUIRE(index < c.n);
        total += count;
        ++distinct;
      }
      REQUIRE(total == epoch_total);
      REQUIRE(distinct == (c.drop_last ? epoch_total : c.n));
    }
  }
}

TEST_CASE("padding repeats the order from its start, even when it wraps more than once", "[distributed]") {
  // N=2, R=7: total 7, order [o0, o1] repeated: o0 o1 o0 o1 o0 o1 o0.
  const auto order = torch_randperm(2, epoch_seed(3, 0));
  for (int rank = 0; rank < 7; ++rank) {
    DistributedSampler sampler(config_of(2, 0, true, false, 3), 7, rank);
    REQUIRE(whole_epoch(sampler) == std::vector<std::int64_t>{order[rank % 2]});
  }
  DistributedSampler dropped(config_of(2, 0, true, true, 3), 7, 0);
  REQUIRE(dropped.num_steps() == 0);
  REQUIRE(dropped.samples_per_rank() == 0);
}

TEST_CASE("every batch holds the rank's positions of the padded order, also where the padding wraps", "[distributed]") {
  // Expected from the definition: the order padded by repeating it from its start (j -> order[j % N]),
  // rank r takes positions r, r+R, ..., cut into batches of B.
  struct Case {
    std::int64_t n, batch;
    int world;
    bool shuffle;
  };
  for (const Case& c : {Case{10, 3, 3, true}, Case{10, 4, 4, false}, Case{2, 1, 7, true}, Case{3, 2, 5, true},
                        Case{1000, 7, 6, true}, Case{5, 3, 11, false}}) {
    CAPTURE(c.n, c.batch, c.world, c.shuffle);
    const std::vector<std::int64_t> order =
        c.shuffle ? torch_randperm(c.n, epoch_seed(4, 2)) : std::vector<std::int64_t>{};
    const std::int64_t per_rank = (c.n + c.world - 1) / c.world;
    for (int rank = 0; rank < c.world; ++rank) {
      DistributedSampler sampler(config_of(c.n, c.batch, c.shuffle, false, 4), c.world, rank);
      sampler.set_epoch(2);
      std::vector<std::vector<std::int64_t>> expected;
      for (std::int64_t k = 0; k < per_rank; ++k) {
        if (k % c.batch == 0) expected.emplace_back();
        const std::int64_t padded = (rank + k * c.world) % c.n;
        expected.back().push_back(c.shuffle ? order[static_cast<std::size_t>(padded)] : padded);
      }
      REQUIRE(all_batches(sampler) == expected);
    }
  }
}

TEST_CASE("batches: last partial batch kept or dropped, same count on every rank", "[distributed]") {
  for (bool drop_last_batch : {false, true}) {
    for (int rank = 0; rank < 3; ++rank) {
      DistributedSampler sampler(config_of(23, 3, true, false, 9, drop_last_batch), 3, rank);  // 8 per rank
      REQUIRE(sampler.num_steps() == (drop_last_batch ? 2 : 3));
      const auto batches = all_batches(sampler);
      REQUIRE(batches[0].size() == 3);
      if (!drop_last_batch) REQUIRE(batches[2].size() == 2);
    }
  }
}

TEST_CASE("elastic resume: a state saved at R1 resumes at R2 with the same global batch", "[distributed][elastic]") {
  const std::int64_t n = 997, global_batch = 24;
  for (int world_before : {1, 2, 3, 4, 6}) {
    for (int world_after : {1, 2, 3, 4, 6, 8}) {
      CAPTURE(world_before, world_after);
      const strider::testing::SamplerFactory make = [&](int w, int rank) -> std::unique_ptr<Sampler> {
        return std::make_unique<DistributedSampler>(config_of(n, per_rank_batch_for(global_batch, w), true, false, 77),
                                                    w, rank);
      };
      const auto before = strider::testing::global_batches(make, world_before, 5);
      const auto after = strider::testing::global_batches(make, world_after, 5);
      DistributedSampler saver(config_of(n, global_batch / world_before, true, false, 77), world_before, 0);
      saver.set_epoch(5);
      const std::int64_t step = 17;
      const SamplerState saved = saver.state(step);
      REQUIRE(saved.consumed == step * global_batch);
      for (int rank = 0; rank < world_after; ++rank) {
        DistributedSampler resumed(config_of(n, global_batch / world_after, true, false, 77), world_after, rank);
        REQUIRE(resumed.resume(saved) == step);
      }
      // Every global step but the padded last one is the same set of samples.
      const std::size_t full_steps = static_cast<std::size_t>(n / global_batch);
      REQUIRE(before.size() >= full_steps);
      REQUIRE(after.size() >= full_steps);
      for (std::size_t k = 0; k < full_steps; ++k) REQUIRE(before[k] == after[k]);
    }
  }
  DistributedSampler sampler(config_of(n, 8, true, false, 77), 3, 0);
  REQUIRE_THROWS_AS(per_rank_batch_for(global_batch, 5), UsageError);
  SamplerState other_global = sampler.state(2);
  other_global.global_batch_size = 30;
  REQUIRE_THROWS_AS(sampler.resume(other_global), UsageError);
  SamplerState other_seed = sampler.state(2);
  other_seed.seed = 78;
  REQUIRE_THROWS_AS(sampler.resume(other_seed), UsageError);
  SamplerState off_boundary = sampler.state(2);
  off_boundary.consumed += 1;
  REQUIRE_THROWS_AS(sampler.resume(off_boundary), UsageError);
}

TEST_CASE("64-bit sizes: N near 2^63 without shuffle has no overflow", "[distributed][int64]") {
  const std::int64_t n = std::numeric_limits<std::int64_t>::max();
  for (int world : {1, 3, 13}) {
    for (bool drop_last : {false, true}) {
      CAPTURE(world, drop_last);
      DistributedSampler last_rank(config_of(n, 1024, false, drop_last, 0), world, world - 1);
      const std::int64_t per_rank = drop_last ? n / world : n / world + (n % world != 0);
      REQUIRE(last_rank.samples_per_rank() == per_rank);
      REQUIRE(last_rank.total_size() == static_cast<std::uint64_t>(per_rank) * static_cast<std::uint64_t>(world));
      std::vector<std::int64_t> batch;
      last_rank.batch(last_rank.num_steps() - 1, batch);
      REQUIRE(!batch.empty());
      for (std::int64_t index : batch) {
        REQUIRE(index >= 0);
        REQUIRE(index < n);
      }
      // The last position of the last rank: global position total-1 wraps to (total-1) mod N, with
      // total = per_rank * R written out (it exceeds 2^63 - 1 for some R without drop_last).
      const std::uint64_t last_global = static_cast<std::uint64_t>(per_rank) * static_cast<std::uint64_t>(world) - 1;
      REQUIRE(batch.back() == static_cast<std::int64_t>(last_global % static_cast<std::uint64_t>(n)));
      REQUIRE(last_rank.consumed_after(last_rank.num_steps()) > 0);
    }
  }
  // A position beyond 2^32 keeps all 64 bits.
  DistributedSampler big(config_of(std::int64_t{1} << 40, 4, false, false, 0), 8, 5);
  std::vector<std::int64_t> batch;
  big.batch((std::int64_t{1} << 33) / 4, batch);
  REQUIRE(batch[0] == (std::int64_t{1} << 33) * 8 + 5);
}

TEST_CASE("seed+epoch wraps modulo 2^64 and only its low 32 bits matter, as in torch", "[distributed][torch]") {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  DistributedSampler a(config_of(50, 0, true, false, max), 2, 0);
  a.set_epoch(1);  // seed+epoch = 2^63: wraps, no UB
  DistributedSampler b(config_of(50, 0, true, false, std::numeric_limits<std::int64_t>::min()), 2, 0);
  REQUIRE(whole_epoch(a) == whole_epoch(b));
  DistributedSampler c(config_of(50, 0, true, false, (std::int64_t{1} << 32) + 5), 2, 0);
  DistributedSampler d(config_of(50, 0, true, false, 5), 2, 0);
  REQUIRE(whole_epoch(c) == whole_epoch(d));
}

TEST_CASE("bad distributed sampler configurations are usage errors", "[distributed][errors]") {
  REQUIRE_THROWS_AS(DistributedSampler(config_of(-1, 0, true, false, 0), 2, 0), UsageError);
  REQUIRE_THROWS_AS(DistributedSampler(config_of(10, -3, true, false, 0), 2, 0), UsageError);
  REQUIRE_THROWS_AS(DistributedSampler(config_of(10, 0, true, false, 0), 0, 0), UsageError);
  REQUIRE_THROWS_AS(DistributedSampler(config_of(10, 0, true, false, 0), 2, 2), UsageError);
  REQUIRE_THROWS_AS(DistributedSampler(config_of(10, 0, true, false, 0), 2, -1), UsageError);
  DistributedSampler sampler(config_of(10, 2, true, false, 0), 2, 0);
  std::vector<std::int64_t> batch;
  REQUIRE_THROWS_AS(sampler.batch(sampler.num_steps(), batch), UsageError);
  REQUIRE_THROWS_AS(SamplerState::parse("mode=distributed seed=x"), DataError);
}

TEST_CASE("torch 1.13 randperm goldens above torch 2.6's switch at N = 214,748,364", "[distributed][torch][slow]") {
  // Lines "N seed hash HEX : first 16 entries", HEX = sum over i of mix64(mix64(i) ^ order[i]) mod
  // 2^64 (strider::mix64) (scripts/gen_torch_goldens.py --large). About 2 GB for the order.
  std::ifstream file(STRIDER_TEST_DATA_DIR "/torch_randperm_large_goldens.txt");
  REQUIRE(file.good());
  std::vector<std::int64_t> order;
  int lines = 0;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    CAPTURE(line);
    std::istringstream fields(line.substr(0, line.find(" :")));
    std::istringstream prefix_text(line.substr(line.find(" :") + 2));
    std::int64_t n = 0;
    std::uint64_t seed = 0;
    std::string hash_word, hex;
    fields >> n >> seed >> hash_word >> hex;
    REQUIRE(hash_word == "hash");
    REQUIRE(n > 214748364);
    std::vector<std::int64_t> prefix;
    for (std::int64_t value; prefix_text >> value;) prefix.push_back(value);
    REQUIRE(prefix.size() == 16);
    torch_randperm(n, seed, order);
    REQUIRE(std::vector<std::int64_t>(order.begin(), order.begin() + 16) == prefix);
    std::uint64_t hash = 0;
    for (std::int64_t i = 0; i < n; ++i)
      hash +=
          mix64(mix64(static_cast<std::uint64_t>(i)) ^ static_cast<std::uint64_t>(order[static_cast<std::size_t>(i)]));
    REQUIRE(hash == std::stoull(hex, nullptr, 16));
    ++lines;
  }
  REQUIRE(lines == 3);
}

TEST_CASE("invariants over a sweep of sizes, world sizes and batch sizes", "[distributed][slow]") {
  for (std::int64_t n : {1, 2, 3, 5, 8, 13, 31, 64, 100, 257}) {
    for (int world : {1, 2, 3, 4, 5, 7, 13}) {
      for (std::int64_t batch : {0, 1, 3, 8}) {
        for (bool drop_last : {false, true}) {
          CAPTURE(n, world, batch, drop_last);
          const strider::testing::SamplerFactory make = [&](int w, int rank) -> std::unique_ptr<Sampler> {
            return std::make_unique<DistributedSampler>(config_of(n, batch, true, drop_last, n * 31 + world), w, rank);
          };
          strider::testing::InvariantOptions options;
          options.world_size = world;
          options.epoch_sensitive = false;  // tiny N may give the same order in two epochs
          strider::testing::check_sampler_invariants(make, options);
        }
      }
    }
  }
}

TEST_CASE("shuffle_in_place gives each order of four values about equally often (chi-square)", "[random]") {
  // 24 orders, 24000 shuffles: about 1000 each. A fair shuffle gives chi-square (23 degrees of
  // freedom) below 60 but for a 4e-5 chance; the seed is fixed, so the outcome is too.
  std::mt19937_64 engine(2024);
  std::map<std::vector<std::int64_t>, int> counts;
  const std::vector<std::int64_t> values = {0, 1, 2, 3};
  for (int draw = 0; draw < 24000; ++draw) {
    std::vector<std::int64_t> shuffled = values;
    shuffle_in_place(shuffled, engine);
    REQUIRE(std::is_permutation(shuffled.begin(), shuffled.end(), values.begin()));
    ++counts[shuffled];
  }
  REQUIRE(counts.size() == 24u);
  double chi_square = 0;
  for (const auto& [order, count] : counts) chi_square += (count - 1000.0) * (count - 1000.0) / 1000.0;
  REQUIRE(chi_square < 60);
  // The empty and one-element vectors stay as they are.
  std::vector<std::int64_t> empty, one = {7};
  shuffle_in_place(empty, engine);
  shuffle_in_place(one, engine);
  REQUIRE(empty.empty());
  REQUIRE(one == std::vector<std::int64_t>{7});
}

namespace {

/// Of `draws` words of the block engine (with `refill`, or the fastest build where null) and of the
/// standard one from the same seed, how many differ.
template <typename Block, typename Standard>
std::int64_t differing_words(typename Block::Word seed, int draws, typename Block::Refill refill = nullptr) {
  Standard reference(seed);
  Block engine(seed, refill);
  std::int64_t differing = 0;
  for (int i = 0; i < draws; ++i) differing += engine() != reference() ? 1 : 0;
  return differing;
}

}  // namespace

TEST_CASE("torch_randperm's engine draws std::mt19937's stream", "[distributed][torch]") {
  for (std::uint32_t seed : {0u, 1u, 5489u, 4294967295u}) {
    CAPTURE(seed);
    REQUIRE(differing_words<sampling_detail::BlockMt19937, std::mt19937>(seed, 5000) == 0);  // 8 blocks of 624
  }
}

TEST_CASE("every build of the twister's block refill this CPU runs draws the standard streams",
          "[distributed][random]") {
  const std::vector<sampling_detail::RefillBuild>& builds = sampling_detail::refill_builds();
  REQUIRE(!builds.empty());
  REQUIRE(std::string(builds.back().name) == "baseline");  // the fallback is always there
  for (const sampling_detail::RefillBuild& build : builds) {
    CAPTURE(build.name);
    for (std::uint32_t seed : {0u, 5489u, 4294967295u}) {
      CAPTURE(seed);
      REQUIRE(differing_words<sampling_detail::BlockMt19937, std::mt19937>(seed, 5000, build.refill32) == 0);
      REQUIRE(differing_words<sampling_detail::BlockMt19937_64, std::mt19937_64>(seed, 2500, build.refill64) == 0);
    }
  }
}

TEST_CASE(
    "the plans' block engine draws std::mt19937_64's stream, and shuffles words of 64 and 32 bits as shuffle_in_place",
    "[distributed][random]") {
  for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{5489}, ~std::uint64_t{0}, derive_seed(3, 7, 11)}) {
    CAPTURE(seed);
    REQUIRE(differing_words<sampling_detail::BlockMt19937_64, std::mt19937_64>(seed, 2500) == 0);  // 8 blocks of 312
    {  // drawers (the shuffle's) and the engine in turn draw one stream: each drawer hands its place back
      std::mt19937_64 standard(seed);
      sampling_detail::BlockMt19937_64 engine(seed);
      int differing = 0;
      for (int turn = 0; turn < 4; ++turn) {
        if (turn % 2 == 0) {
          sampling_detail::BlockMt19937_64::Drawer draw(engine);
          for (int k = 0; k < 400; ++k) differing += draw() != standard() ? 1 : 0;
        } else {
          for (int k = 0; k < 250; ++k) differing += engine() != standard() ? 1 : 0;
        }
      }
      REQUIRE(differing == 0);
    }
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{313}, std::size_t{5000}}) {
      CAPTURE(n);
      std::vector<std::int64_t> expected(n);
      std::iota(expected.begin(), expected.end(), std::int64_t{0});
      std::vector<std::int64_t> signed_words = expected;
      std::vector<std::uint64_t> words(expected.begin(), expected.end());
      std::vector<std::uint32_t> narrow_words(expected.begin(), expected.end());  // a bucketed plan's marked order
      std::mt19937_64 standard(seed);
      shuffle_in_place(expected, standard);
      sampling_detail::shuffle_seeded(signed_words.data(), n, seed);
      sampling_detail::shuffle_seeded(words.data(), n, seed);
      sampling_detail::shuffle_seeded(narrow_words.data(), n, seed);
      REQUIRE(signed_words == expected);
      REQUIRE(std::equal(words.begin(), words.end(), expected.begin(),
                         [](std::uint64_t a, std::int64_t b) { return a == static_cast<std::uint64_t>(b); }));
      REQUIRE(std::equal(narrow_words.begin(), narrow_words.end(), expected.begin(),
                         [](std::uint32_t a, std::int64_t b) { return a == static_cast<std::uint64_t>(b); }));
    }
  }
}

namespace {

/// A shared order that shuffles on every call, as a node's writer would, and records what it was
/// asked for.
class CountingOrder final : public SharedOrder {
 public:
  void take(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
            std::int64_t* out) override {
    const std::vector<std::int64_t> order = torch_randperm(n, seed);
    take_positions(order.data(), n, first, stride, count, out);
    seeds.push_back(seed);
  }
  std::vector<std::uint64_t> seeds;
};

}  // namespace

TEST_CASE("take_positions: a rank's positions of an order of n, wrapping past its end", "[distributed]") {
  const std::vector<std::int64_t> order = {40, 41, 42, 43, 44};
  std::vector<std::int64_t> out(7, -1);
  take_positions(order.data(), 5, 1, 3, 7, out.data());  // positions 1, 4, 7, 10, 13, 16, 19 mod 5
  REQUIRE(out == std::vector<std::int64_t>{41, 44, 42, 40, 43, 41, 44});
  take_positions(order.data(), 5, 12, 11, 3, out.data());  // first and stride past n: 12, 23, 34 mod 5
  REQUIRE(std::vector<std::int64_t>(out.begin(), out.begin() + 3) == std::vector<std::int64_t>{42, 43, 44});
}

TEST_CASE("with a shared order the sampler keeps only its positions and gives the same batches", "[distributed]") {
  struct Case {
    std::int64_t n, batch;
    int world;
    bool drop_last;
  };
  for (const Case& c : {Case{1000, 7, 6, false}, Case{10, 3, 3, false}, Case{2, 1, 7, false}, Case{23, 4, 3, true},
                        Case{997, 0, 4, false}, Case{5, 2, 1, false}}) {
    CAPTURE(c.n, c.batch, c.world, c.drop_last);
    for (int rank = 0; rank < c.world; ++rank) {
      auto shared = std::make_shared<CountingOrder>();
      DistributedSamplerConfig with = config_of(c.n, c.batch, true, c.drop_last, 11);
      with.shared_order = shared;
      DistributedSampler alone(config_of(c.n, c.batch, true, c.drop_last, 11), c.world, rank);
      DistributedSampler taking(with, c.world, rank);
      for (std::int64_t epoch : {0, 3, 1}) {
        alone.set_epoch(epoch);
        taking.set_epoch(epoch);
        REQUIRE(all_batches(taking) == all_batches(alone));
        for (std::int64_t position = 0; position < alone.samples_per_rank(); ++position)
          REQUIRE(taking.index_at(position) == alone.index_at(position));
      }
      // One take per planned epoch (the constructor plans epoch 0), with the epoch's seed.
      REQUIRE(shared->seeds ==
              std::vector<std::uint64_t>{epoch_seed(11, 0), epoch_seed(11, 0), epoch_seed(11, 3), epoch_seed(11, 1)});
    }
  }
  // Without shuffle there is no order to share: it is never asked.
  auto shared = std::make_shared<CountingOrder>();
  DistributedSamplerConfig unshuffled = config_of(50, 4, false, false, 11);
  unshuffled.shared_order = shared;
  DistributedSampler sampler(unshuffled, 3, 1);
  sampler.set_epoch(2);
  REQUIRE(whole_epoch(sampler) == whole_epoch(DistributedSampler(config_of(50, 4, false, false, 11), 3, 1)));
  REQUIRE(shared->seeds.empty());
}
