// The bucketed sampler: token budget, multiples, errors, world-size independence, elastic resume,
// and the padding/balance targets on a log-normal length distribution.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <utility>

#include "sampler_properties.hpp"
#include "sampling/key_sort.hpp"
#include "strider/core/error.hpp"
#include "strider/sampling/bucketed_sampler.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/sampling/plan_stats.hpp"
#include "strider/sampling/synthetic_lengths.hpp"

using namespace strider;
using strider::testing::all_batches;

namespace {

std::shared_ptr<const std::vector<std::int64_t>> lognormal_lengths(std::int64_t count, std::int64_t seed = 1) {
  return std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("lognormal:median=128,min=8,max=2048", count, seed));
}

BucketedSamplerConfig bucketed_config(std::shared_ptr<const std::vector<std::int64_t>> lengths, std::int64_t max_tokens,
                                      std::int64_t megabatch = 8) {
  BucketedSamplerConfig config;
  config.lengths = std::move(lengths);
  config.max_tokens = max_tokens;
  config.megabatch = megabatch;
  config.step_group = 16;
  config.seed = 5;
  return config;
}

std::int64_t cost_of(const std::vector<std::int64_t>& batch, const std::vector<std::int64_t>& lengths) {
  std::int64_t longest = 0;
  for (std::int64_t index : batch) longest = std::max(longest, lengths[static_cast<std::size_t>(index)]);
  return longest * static_cast<std::int64_t>(batch.size());
}

std::int64_t tokens_of(const std::vector<std::int64_t>& batch, const std::vector<std::int64_t>& lengths) {
  std::int64_t tokens = 0;
  for (std::int64_t index : batch) tokens += lengths[static_cast<std::size_t>(index)];
  return tokens;
}

}  // namespace

TEST_CASE("bucketed sampler: invariants of every mode (batch sizes vary)", "[bucketed]") {
  const auto lengths = lognormal_lengths(600);
  for (const int world : {1, 3, 4}) {
    for (const bool most_expensive_first : {false, true}) {
      CAPTURE(world, most_expensive_first);
      testing::InvariantOptions options;
      options.world_size = world;
      options.equal_batch_sizes = false;
      check_sampler_invariants(
          [&](int world_size, int rank) {
            BucketedSamplerConfig config = bucketed_config(lengths, 4096, 4);
            config.most_expensive_first = most_expensive_first;
            return std::make_unique<BucketedSampler>(config, world_size, rank);
          },
          options);
    }
  }
}

TEST_CASE("bucketed sampler: budget, max batch size, multiples, exact coverage", "[bucketed]") {
  const auto lengths = lognormal_lengths(3000, 2);
  for (const std::int64_t multiple : {1, 4}) {
    for (const std::int64_t max_batch : {0, 24}) {
      CAPTURE(multiple, max_batch);
      BucketedSamplerConfig config = bucketed_config(lengths, 8192);
      config.batch_size_multiple = multiple;
      config.max_batch_size = max_batch;
      BucketedSampler sampler(config, 1, 0);
      sampler.set_epoch(2);
      std::vector<int> seen(lengths->size(), 0);
      int not_multiple = 0;
      std::vector<std::int64_t> batch;
      std::int64_t most_tokens = 0;
      for (std::int64_t position = 0; position < sampler.num_batches(); ++position) {
        sampler.sequence_batch(position, batch);
        REQUIRE(!batch.empty());
        most_tokens = std::max(most_tokens, tokens_of(batch, *lengths));
        REQUIRE(cost_of(batch, *lengths) <= 8192);
        REQUIRE(cost_of(batch, *lengths) == sampler.sequence_cost(position));
        if (max_batch > 0) REQUIRE(static_cast<std::int64_t>(batch.size()) <= max_batch);
        REQUIRE(static_cast<std::int64_t>(batch.size()) <= sampler.max_batch_size());
        not_multiple += static_cast<std::int64_t>(batch.size()) % multiple != 0 ? 1 : 0;
        for (std::int64_t index : batch) ++seen[static_cast<std::size_t>(index)];
      }
      REQUIRE(sampler.max_batch_elements() == most_tokens);  // what the prefetcher sizes its buffers by
      REQUIRE(not_multiple <= 1);                            // only the epoch's last formed batch may miss the multiple
      for (int count : seen) REQUIRE(count == 1);
    }
  }
}

TEST_CASE("bucketed sampler: the most tokens of a batch count every sample of it", "[bucketed]") {
  // 15 samples of 50 tokens and 5 of 51 under a budget of 510, in one window: batches of 10 x 50
  // (500 tokens) and 5 x 50 + 5 x 51 (505); the batch with the most tokens holds both lengths.
  std::vector<std::int64_t> values(15, 50);
  values.insert(values.end(), 5, 51);
  const auto lengths = std::make_shared<const std::vector<std::int64_t>>(values);
  BucketedSamplerConfig config = bucketed_config(lengths, 510, 0);
  config.shuffle = false;
  BucketedSampler sampler(config, 1, 0);
  REQUIRE(sampler.num_batches() == 2);
  REQUIRE(sampler.max_batch_size() == 10);
  REQUIRE(sampler.max_batch_elements() == 505);
}

TEST_CASE("bucketed sampler: clear errors for impossible options", "[bucketed][errors]") {
  auto lengths = std::make_shared<std::vector<std::int64_t>>(100, 64);
  (*lengths)[42] = 5000;
  auto build = [&](BucketedSamplerConfig config) { return BucketedSampler(config, 2, 0); };
  REQUIRE_THROWS_WITH(build(bucketed_config(lengths, 4096)),
                      Catch::Contains("sample 42 has length 5000, longer than max_tokens 4096"));
  REQUIRE_THROWS_AS(build(bucketed_config(lengths, 4096)), UsageError);
  (*lengths)[42] = 1024;
  BucketedSamplerConfig config = bucketed_config(lengths, 4096);
  config.batch_size_multiple = 8;
  REQUIRE_THROWS_WITH(build(config), Catch::Contains("batch_size_multiple 8") && Catch::Contains("sample 42"));
  config.batch_size_multiple = 2;
  config.max_batch_size = 1;
  REQUIRE_THROWS_WITH(build(config), Catch::Contains("max_batch_size 1 is below batch_size_multiple 2"));
  REQUIRE_THROWS_WITH(build(bucketed_config(lengths, 0)), Catch::Contains("max_tokens must be > 0"));
  REQUIRE_THROWS_WITH(build(bucketed_config(nullptr, 4096)), Catch::Contains("needs per-sample lengths"));
  (*lengths)[7] = 0;
  REQUIRE_THROWS_WITH(build(bucketed_config(lengths, 4096)), Catch::Contains("sample 7 has length 0"));
  SamplerOptions options;
  options.mode = "bucketed";
  options.dataset_size = 99;
  options.lengths = lengths;
  options.max_tokens = 4096;
  REQUIRE_THROWS_WITH(make_sampler(options, 1, 0), Catch::Contains("100 lengths for a dataset of 99 samples"));
}

TEST_CASE("bucketed sampler: the batch sequence does not depend on the world size; elastic resume",
          "[bucketed][elastic]") {
  const auto lengths = lognormal_lengths(2000, 3);
  BucketedSampler single(bucketed_config(lengths, 4096), 1, 0);
  single.set_epoch(1);
  std::vector<std::int64_t> expected;
  for (const int world : {2, 3, 4, 7}) {
    for (int rank = 0; rank < world; ++rank) {
      BucketedSampler sampler(bucketed_config(lengths, 4096), world, rank);
      sampler.set_epoch(1);
      REQUIRE(sampler.num_steps() * world >= single.num_batches());
      REQUIRE((sampler.num_steps() - 1) * world < single.num_batches());
      const auto batches = all_batches(sampler);
      for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
        single.sequence_batch((step * world + rank) % single.num_batches(), expected);
        REQUIRE(batches[static_cast<std::size_t>(step)] == expected);
      }
    }
  }
  // Saved at 4 ranks after 3 steps (12 global batches): 2 ranks continue at step 6, 3 ranks at 4.
  BucketedSampler four(bucketed_config(lengths, 4096), 4, 1);
  four.set_epoch(1);
  const SamplerState saved = four.state(3);
  REQUIRE(saved.consumed == 12);
  REQUIRE(saved.global_batch_size == 0);
  BucketedSampler two(bucketed_config(lengths, 4096), 2, 0);
  REQUIRE(two.resume(saved) == 6);
  BucketedSampler three(bucketed_config(lengths, 4096), 3, 2);
  REQUIRE(three.resume(saved) == 4);
  BucketedSampler five(bucketed_config(lengths, 4096), 5, 0);
  REQUIRE_THROWS_AS(five.resume(saved), UsageError);  // 12 batches are no step boundary at 5 ranks
}

TEST_CASE("bucketed sampler: the costliest batch first", "[bucketed]") {
  const auto lengths = lognormal_lengths(2000, 4);
  BucketedSamplerConfig config = bucketed_config(lengths, 4096);
  config.most_expensive_first = true;
  BucketedSampler sampler(config, 4, 0);
  sampler.set_epoch(3);
  std::int64_t costliest = 0;
  for (std::int64_t position = 0; position < sampler.num_batches(); ++position)
    costliest = std::max(costliest, sampler.sequence_cost(position));
  REQUIRE(sampler.sequence_cost(0) == costliest);
}

TEST_CASE("bucketed sampler: padding and balance targets (log-normal, 16384 tokens, megabatch 64, 4 ranks)",
          "[bucketed][statistics]") {
  // Deterministic properties of the fixed seed's plan, not timings.
  SamplerOptions options;
  options.mode = "bucketed";
  options.dataset_size = 50'000;
  options.lengths = lognormal_lengths(options.dataset_size, 0);
  options.max_tokens = 16384;
  options.megabatch = 64;
  const PlanStats bucketed = plan_stats(options, 4, 0);
  CAPTURE(bucketed.padding_efficiency, bucketed.step_imbalance, bucketed.worst_step_imbalance,
          bucketed.mean_batch_size);
  REQUIRE(bucketed.padding_efficiency >= 0.9);
  REQUIRE(bucketed.step_imbalance <= 1.1);

  // Fixed-size random batches of the same mean size.
  options.mode = "distributed";
  options.batch_size = std::llround(bucketed.mean_batch_size);
  const PlanStats fixed = plan_stats(options, 4, 0);
  CAPTURE(fixed.padding_efficiency, fixed.step_imbalance);
  REQUIRE(fixed.padding_efficiency <= 0.5);
  REQUIRE(fixed.step_imbalance > bucketed.step_imbalance);
  INFO("bucketed: efficiency " << bucketed.padding_efficiency << ", imbalance " << bucketed.step_imbalance << " (worst "
                               << bucketed.worst_step_imbalance << "); fixed batches of " << options.batch_size
                               << ": efficiency " << fixed.padding_efficiency << ", imbalance "
                               << fixed.step_imbalance);
}

TEST_CASE("bucketed sampler: a window's samples are formed into batches by ascending (length, index)", "[bucketed]") {
  // One window (megabatch 0) of shuffled samples, one rank: each batch is a run of the window
  // sorted by length, ties by index, so the batches put back in order of their first sample are
  // every sample in that order. Sizes that take the dense sort of packed keys (5,000 and 70,000
  // samples, one window of every index; the radix sort's cases are in test_key_sort.cpp) and the
  // comparison sort (300), with many ties (lengths 1..40) and with few (1..4,000); and a budget of
  // 2^62 tokens, whose lengths do not fit a word beside an index (the entries are indices, sorted
  // by comparing lengths: one batch of the whole window). Where the window is marked at once (every
  // budget but 2^62), the order is marked in 32-bit words where an index and the lengths' span fit
  // one, and in 64-bit words where they do not (270,000 samples of lengths 1..40,000).
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> cases = {
      {300, 40, 8192},         {300, 4000, 8192},   {300, 4000, std::int64_t{1} << 62},
      {5000, 40, 8192},        {5000, 4000, 8192},  {5000, 4000, std::int64_t{1} << 62},
      {70000, 40, 8192},       {70000, 4000, 8192}, {70000, 4000, std::int64_t{1} << 62},
      {270000, 40000, 1 << 16}};
  for (const auto& [n, longest, budget] : cases) {
    CAPTURE(n, longest, budget);
    const auto lengths = std::make_shared<const std::vector<std::int64_t>>(
        synthetic_lengths("uniform:min=1,max=" + std::to_string(longest), n, 3));
    const auto before = [&](std::int64_t a, std::int64_t b) {
      const std::int64_t la = (*lengths)[static_cast<std::size_t>(a)], lb = (*lengths)[static_cast<std::size_t>(b)];
      return la != lb ? la < lb : a < b;
    };
    BucketedSampler sampler(bucketed_config(lengths, budget, 0), 1, 0);
    sampler.set_epoch(0);
    std::vector<std::vector<std::int64_t>> batches = all_batches(sampler);
    REQUIRE((budget < (std::int64_t{1} << 62) || batches.size() == 1));
    std::sort(batches.begin(), batches.end(), [&](const auto& a, const auto& b) { return before(a[0], b[0]); });
    std::vector<std::int64_t> formed;
    for (const std::vector<std::int64_t>& batch : batches) formed.insert(formed.end(), batch.begin(), batch.end());
    std::vector<std::int64_t> expected(static_cast<std::size_t>(n));
    std::iota(expected.begin(), expected.end(), std::int64_t{0});
    std::sort(expected.begin(), expected.end(), before);
    REQUIRE(formed == expected);
  }
}

namespace {

/// A SharedPlan in one process: the first share() of a key makes the plan and keeps its bytes; a
/// later one hands them, changed by `spoil` first, to load(), and makes the plan where load()
/// refuses them. With `run_ahead`, a share() that finds the plan kept first calls `ahead`, as a rank
/// that waits for another's plan while the next is its own, and again while it returns true (a
/// wait that outlasts that work).
class KeptPlan final : public SharedPlan {
 public:
  std::function<void(std::vector<std::byte>&)> spoil;
  bool run_ahead = false;    // as a rank that waits for the plan while the next is its own
  int most_ahead_calls = 0;  // calls of `ahead` per wait at most (0: until it returns false)
  int made = 0, loaded = 0, refused = 0, ahead = 0, ahead_slices = 0;
  std::int64_t last_kept_bytes = 0;  // of the plan made last
  void share(std::uint64_t key, std::uint64_t /*turn*/, const std::function<void()>& make,
             const std::function<std::vector<Piece>()>& pieces,
             const std::function<bool(const std::byte*, std::int64_t)>& load,
             const std::function<bool()>& next) override {
    const auto kept = kept_.find(key);
    if (kept != kept_.end()) {
      if (run_ahead) {
        int calls = 1;
        for (bool more = next(); more && (most_ahead_calls == 0 || calls < most_ahead_calls); more = next(), ++calls)
          ++ahead_slices;
        ++ahead;
      }
      std::vector<std::byte> bytes = kept->second;
      if (spoil) spoil(bytes);
      if (load(bytes.data(), static_cast<std::int64_t>(bytes.size()))) {
        ++loaded;
        return;
      }
      ++refused;
      make();
      return;
    }
    make();
    ++made;
    std::vector<std::byte>& bytes = kept_[key];
    for (const Piece& piece : pieces()) {
      const auto* first = static_cast<const std::byte*>(piece.data);
      bytes.insert(bytes.end(), first, first + piece.bytes);
    }
    last_kept_bytes = static_cast<std::int64_t>(bytes.size());
  }

 private:
  std::map<std::uint64_t, std::vector<std::byte>> kept_;
};

/// Where a kept plan of 3,000 samples, each `width` bytes, holds batch `batch` (plan_pieces: a
/// header of 24 bytes, the samples, then the spans of 24 bytes, each its first sample and count):
/// the offset of the batch's first sample in the bytes, and its count.
std::pair<std::size_t, std::int64_t> batch_in_plan(const std::vector<std::byte>& bytes, std::size_t width,
                                                   std::size_t batch) {
  constexpr std::size_t kHeader = 24, kSamples = 3000, kSpan = 24;
  std::int64_t span[2];  // first, count
  std::memcpy(span, bytes.data() + kHeader + width * kSamples + kSpan * batch, sizeof(span));
  return {kHeader + width * static_cast<std::size_t>(span[0]), span[1]};
}

}  // namespace

TEST_CASE("bucketed sampler: a shared plan is the plan, and bytes that are not one are refused", "[bucketed]") {
  const auto lengths = std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("lognormal:median=40,min=1,max=300", 3000, 5));
  const BucketedSamplerConfig config = bucketed_config(lengths, 1024, 2);
  BucketedSampler alone(config, 2, 1);
  alone.set_epoch(3);
  const std::vector<std::vector<std::int64_t>> expected = all_batches(alone);
  auto kept = std::make_shared<KeptPlan>();
  BucketedSamplerConfig shared_config = config;
  shared_config.shared_plan = kept;
  BucketedSampler maker(shared_config, 2, 1), copier(shared_config, 2, 1);  // epoch 0: made, then loaded
  maker.set_epoch(3);
  copier.set_epoch(3);  // the same key: loaded from the kept bytes, not made
  REQUIRE(kept->made == 2);
  REQUIRE(kept->loaded == 2);
  REQUIRE(all_batches(copier) == expected);
  REQUIRE(copier.max_batch_size() == alone.max_batch_size());
  REQUIRE(copier.max_batch_elements() == alone.max_batch_elements());
  REQUIRE(alone.max_batch_elements() > 0);
  // Each spoiled copy is refused, and the plan made instead is the same.
  const std::vector<std::function<void(std::vector<std::byte>&)>> spoils = {
      [](std::vector<std::byte>& bytes) { bytes.resize(bytes.size() - 8); },  // truncated
      [](std::vector<std::byte>& bytes) { bytes[0] = std::byte{0xff}; },      // batch count
      [](std::vector<std::byte>& bytes) { std::fill(bytes.end() - 24, bytes.end() - 16, std::byte{0x7f}); },  // a span
      [](std::vector<std::byte>& bytes) { std::fill(bytes.begin() + 8, bytes.begin() + 16, std::byte{0}); },  // largest
      [](std::vector<std::byte>& bytes) {
        std::fill(bytes.begin() + 16, bytes.begin() + 24, std::byte{0x7f});
      },  // the most tokens of a batch, past max_tokens
      [](std::vector<std::byte>& bytes) {
        std::fill(bytes.begin() + 24, bytes.begin() + 24 + 4 * 3000, std::byte{0xff});
      },  // every sample index past N
      [](std::vector<std::byte>& bytes) {
        const std::uint32_t past = 3000;
        std::memcpy(bytes.data() + batch_in_plan(bytes, 4, 1).first, &past, sizeof(past));
      },  // batch 1's (rank 1's) first sample at N, the first index past the samples
  };
  for (std::size_t k = 0; k < spoils.size(); ++k) {
    CAPTURE(k);
    kept->spoil = spoils[k];
    const int refused = kept->refused;
    BucketedSampler again(shared_config, 2, 1);  // epoch 0's bytes spoiled too: refused, made
    again.set_epoch(3);
    REQUIRE(kept->refused == refused + 2);
    REQUIRE(all_batches(again) == expected);
  }
  // A copier holds its own batches only: another rank's samples are neither copied nor checked
  // (batch 2 is rank 0's: rank 1 runs the odd ones, and batch 0 where it pads), and asking for
  // another rank's batch is an error, not another batch.
  REQUIRE(alone.num_batches() >= 3);
  kept->spoil = [](std::vector<std::byte>& bytes) {
    const auto [first, count] = batch_in_plan(bytes, 4, 2);
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(first),
              bytes.begin() + static_cast<std::ptrdiff_t>(first + 4 * static_cast<std::size_t>(count)),
              std::byte{0xff});
  };
  const int refused = kept->refused, loaded = kept->loaded;
  BucketedSampler copied(shared_config, 2, 1);
  copied.set_epoch(3);
  REQUIRE(kept->refused == refused);
  REQUIRE(kept->loaded == loaded + 2);
  REQUIRE(all_batches(copied) == expected);
  std::vector<std::int64_t> batch, own;
  copied.sequence_batch(1, batch);  // rank 1's first
  alone.sequence_batch(1, own);
  REQUIRE(batch == own);
  REQUIRE_THROWS_AS(copied.sequence_batch(2, batch), UsageError);
}

namespace {

/// Two ranks of a node plan epoch `epoch` as the Loader does: the epoch's maker, then the rank that
/// copies its plan (and begins the next meanwhile). Each then holds the batches a sampler of
/// `config` alone makes for its rank.
void plan_as_a_node(const BucketedSamplerConfig& config, Sampler& on0, Sampler& on1, std::int64_t epoch) {
  Sampler& maker = epoch % 2 == 0 ? on0 : on1;
  Sampler& copier = epoch % 2 == 0 ? on1 : on0;
  maker.set_epoch(epoch);
  copier.set_epoch(epoch);
  for (int rank : {0, 1}) {
    BucketedSampler alone(config, 2, rank);
    alone.set_epoch(epoch);
    REQUIRE(all_batches(rank == 0 ? on0 : on1) == all_batches(alone));
  }
}

}  // namespace

TEST_CASE("bucketed sampler: a plan begun ahead, by a copy, is the plan", "[bucketed]") {
  // Two ranks of a node, each planning as the Loader does, on a sampler and its copy in turn; the
  // ranks make the node's plans in turn, and the one that copies this epoch's plan makes the next
  // one's first part meanwhile.
  const auto lengths = std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("lognormal:median=40,min=1,max=300", 3000, 5));
  for (const std::int64_t megabatch : {64, 2}) {  // the windows' samples marked (a few windows); not (too many)
    CAPTURE(megabatch);
    const BucketedSamplerConfig config = bucketed_config(lengths, 1024, megabatch);
    auto kept = std::make_shared<KeptPlan>();
    kept->run_ahead = true;
    BucketedSamplerConfig shared_config = config;
    shared_config.shared_plan = kept;
    // Epoch 0: made by rank 0; rank 1 copies it and begins epoch 1's.
    BucketedSampler rank0(shared_config, 2, 0), rank1(shared_config, 2, 1);
    const std::unique_ptr<Sampler> rank0_copy = rank0.clone(), rank1_copy = rank1.clone();
    const bool marked = megabatch == 64;
    for (std::int64_t epoch = 1; epoch <= 4; ++epoch) {
      CAPTURE(epoch);
      plan_as_a_node(config, epoch % 2 == 0 ? static_cast<Sampler&>(rank0) : *rank0_copy,
                     epoch % 2 == 0 ? static_cast<Sampler&>(rank1) : *rank1_copy, epoch);
      REQUIRE(rank0.plans_begun_ahead() + rank1.plans_begun_ahead() == (marked ? epoch : 0));
    }
    REQUIRE(kept->made == 5);
    REQUIRE(kept->ahead == 5);
    REQUIRE(kept->ahead_slices == (marked ? 5 : 0));  // one slice marks all 3,000 positions
    // An epoch nobody began: made whole, the same.
    BucketedSampler alone(config, 2, 0);
    alone.set_epoch(9);
    rank0.set_epoch(9);
    REQUIRE(all_batches(rank0) == all_batches(alone));
    REQUIRE(rank0.plans_begun_ahead() + rank1.plans_begun_ahead() == (marked ? 4 : 0));
  }
}

TEST_CASE("bucketed sampler: a plan begun ahead and cut off partway through its marking pass is the plan",
          "[bucketed]") {
  // More samples than one slice of the marking pass (16,384): a wait that ends after the first
  // part alone, or after one slice, leaves the maker marks partly marked.
  const auto lengths = std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("lognormal:median=40,min=1,max=300", 40000, 5));
  const BucketedSamplerConfig config = bucketed_config(lengths, 1024, 256);  // about 8 windows: marked
  for (const int most_calls : {1, 2, 3}) {
    CAPTURE(most_calls);
    auto kept = std::make_shared<KeptPlan>();
    kept->run_ahead = true;
    kept->most_ahead_calls = most_calls;
    BucketedSamplerConfig shared_config = config;
    shared_config.shared_plan = kept;
    BucketedSampler rank0(shared_config, 2, 0), rank1(shared_config, 2, 1);
    for (std::int64_t epoch = 1; epoch <= 3; ++epoch) {
      CAPTURE(epoch);
      plan_as_a_node(config, rank0, rank1, epoch);
    }
    REQUIRE(rank0.plans_begun_ahead() + rank1.plans_begun_ahead() == 3);
    REQUIRE(kept->ahead_slices == 4 * (most_calls - 1));  // 4 waits, each cut off before 40,000 are marked
  }
}

TEST_CASE("bucketed sampler: a plan held in 8-byte indices (past 2^32 samples) is the plan held in 4", "[bucketed]") {
  // The wide path runs past 2^32 samples only; the tests' switch makes samplers take it at any N.
  struct WideWhileHere {
    WideWhileHere() { sampling_detail::wide_plan_indices_for_tests(true); }
    ~WideWhileHere() { sampling_detail::wide_plan_indices_for_tests(false); }
  };
  const auto lengths = std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("lognormal:median=40,min=1,max=300", 3000, 5));
  const std::int64_t n = 3000;
  // 4 bytes up to 2^32 samples (the largest index then is 2^32 - 1), 8 past that.
  REQUIRE_FALSE(sampling_detail::wide_plan_indices(std::size_t{1} << 20));
  if (sizeof(std::size_t) >= 8) {
    REQUIRE_FALSE(sampling_detail::wide_plan_indices(static_cast<std::size_t>(std::uint64_t{1} << 32)));
    REQUIRE(sampling_detail::wide_plan_indices(static_cast<std::size_t>((std::uint64_t{1} << 32) + 1)));
  }
  for (const std::int64_t megabatch : {64, 2}) {  // the windows' samples marked and dealt out; sorted one by one
    CAPTURE(megabatch);
    const BucketedSamplerConfig config = bucketed_config(lengths, 1024, megabatch);
    BucketedSampler narrow(config, 2, 1);
    narrow.set_epoch(3);
    REQUIRE(narrow.shared_plan_bytes(10) == 3 * 8 + 4 * n + 10 * 24);
    auto kept = std::make_shared<KeptPlan>();
    BucketedSamplerConfig shared_config = config;
    shared_config.shared_plan = kept;
    BucketedSampler narrow_shared(shared_config, 2, 1);
    narrow_shared.set_epoch(3);
    const std::int64_t narrow_bytes = kept->last_kept_bytes;
    REQUIRE(narrow_bytes == narrow.shared_plan_bytes(narrow.num_batches()));

    const WideWhileHere wide_here;
    BucketedSampler wide(config, 2, 1);
    wide.set_epoch(3);
    REQUIRE(wide.shared_plan_bytes(10) == 3 * 8 + 8 * n + 10 * 24);
    REQUIRE(narrow.shared_plan_bytes(10) == 3 * 8 + 4 * n + 10 * 24);  // a sampler keeps its width
    REQUIRE(all_batches(wide) == all_batches(narrow));
    REQUIRE(wide.max_batch_elements() == narrow.max_batch_elements());
    // Shared: the wide maker's plan holds 4 more bytes per sample, and a wide copier loads it.
    auto wide_kept = std::make_shared<KeptPlan>();
    BucketedSamplerConfig wide_shared_config = config;
    wide_shared_config.shared_plan = wide_kept;
    BucketedSampler maker(wide_shared_config, 2, 1), copier(wide_shared_config, 2, 1);
    maker.set_epoch(3);
    copier.set_epoch(3);
    REQUIRE(wide_kept->last_kept_bytes == narrow_bytes + 4 * n);
    REQUIRE(wide_kept->loaded == 2);  // the copier's epochs 0 and 3
    REQUIRE(wide_kept->refused == 0);
    REQUIRE(all_batches(copier) == all_batches(narrow));
    // A wide plan with a negative sample in this rank's batch 1 is refused (read as unsigned: past
    // N), and made instead.
    wide_kept->spoil = [](std::vector<std::byte>& bytes) {
      const std::int64_t negative = -1;
      std::memcpy(bytes.data() + batch_in_plan(bytes, 8, 1).first, &negative, sizeof(negative));
    };
    BucketedSampler spoiled(wide_shared_config, 2, 1);
    spoiled.set_epoch(3);
    REQUIRE(wide_kept->refused == 2);  // epochs 0 and 3
    REQUIRE(all_batches(spoiled) == all_batches(narrow));
    // A plan of the other width is not this sampler's plan: refused, and made instead.
    BucketedSampler wide_on_narrow_bytes(shared_config, 2, 1);  // kept holds 4-byte plans
    wide_on_narrow_bytes.set_epoch(3);
    REQUIRE(kept->refused == 2);
    REQUIRE(all_batches(wide_on_narrow_bytes) == all_batches(narrow));
  }
}

TEST_CASE("bucketed sampler: batches are packed as a step-by-step greedy packer packs them", "[bucketed]") {
  // Without shuffles and cost groups the epoch's batches run in the order they are formed: each
  // window, the carry of the window before and its own samples sorted by (length, index), packed
  // from the front a sample at a time while the batch stays within the budget and the count limit;
  // the count cut to a multiple unless the window ends there. The marked sort (megabatch 64 and 0)
  // and the windows' own sorts (megabatch 2: too many windows to mark), packed keys and, with a
  // budget of 2^62, bare indices. Then a marked sort whose order is held as words of 64 bits and
  // dealt from the lengths themselves: 131,073 samples (indices of 18 bits) of 1 to 20,000 tokens
  // (15 bits above the shortest) do not fit words of 32.
  const auto reference = [](const BucketedSamplerConfig& config, const std::vector<std::int64_t>& length) {
    const std::int64_t window_tokens = config.megabatch == 0 || config.max_tokens > (std::int64_t{1} << 40)
                                           ? std::numeric_limits<std::int64_t>::max()
                                           : config.megabatch * config.max_tokens;
    const std::int64_t limit =
        config.max_batch_size > 0 ? config.max_batch_size : std::numeric_limits<std::int64_t>::max();
    std::vector<std::vector<std::int64_t>> batches;
    std::vector<std::int64_t> window;
    std::int64_t sum = 0;
    const auto n = static_cast<std::int64_t>(length.size());
    for (std::int64_t sample = 0; sample < n; ++sample) {
      window.push_back(sample);
      sum += length[static_cast<std::size_t>(sample)];
      const bool last = sample + 1 == n;
      if (sum < window_tokens && !last) continue;
      sum = 0;
      std::sort(window.begin(), window.end(), [&](std::int64_t a, std::int64_t b) {
        const std::int64_t la = length[static_cast<std::size_t>(a)], lb = length[static_cast<std::size_t>(b)];
        return la != lb ? la < lb : a < b;
      });
      const auto size = static_cast<std::int64_t>(window.size());
      std::int64_t start = 0;
      while (start < size) {
        std::int64_t count = 0;
        while (start + count < size && count < limit &&
               (count + 1) * length[static_cast<std::size_t>(window[static_cast<std::size_t>(start + count)])] <=
                   config.max_tokens)
          ++count;
        if (start + count == size && !last) break;
        if (start + count < size) count -= count % config.batch_size_multiple;
        batches.emplace_back(window.begin() + start, window.begin() + start + count);
        start += count;
      }
      window.erase(window.begin(), window.begin() + start);
    }
    return batches;
  };
  const auto short_lengths = std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("lognormal:median=40,min=1,max=300", 3000, 5));
  const auto long_lengths =
      std::make_shared<const std::vector<std::int64_t>>(synthetic_lengths("uniform:min=1,max=20000", 131073, 5));
  struct Case {
    std::shared_ptr<const std::vector<std::int64_t>> lengths;
    std::vector<std::int64_t> budgets, megabatches;
  };
  for (const Case& group :
       {Case{short_lengths, {1024, std::int64_t{1} << 62}, {64, 2, 0}}, Case{long_lengths, {1 << 16}, {0}}}) {
    for (const std::int64_t budget : group.budgets) {
      for (const std::int64_t megabatch : group.megabatches) {
        for (const std::int64_t most : {0, 24}) {
          for (const std::int64_t multiple : {1, 3}) {
            CAPTURE(group.lengths->size(), budget, megabatch, most, multiple);
            BucketedSamplerConfig config = bucketed_config(group.lengths, budget, megabatch);
            config.shuffle = false;
            config.step_group = 1;
            config.max_batch_size = most;
            config.batch_size_multiple = multiple;
            BucketedSampler sampler(config, 1, 0);
            const std::vector<std::vector<std::int64_t>> expected = reference(config, *group.lengths);
            REQUIRE(sampler.num_batches() == static_cast<std::int64_t>(expected.size()));
            std::vector<std::int64_t> batch;
            for (std::int64_t position = 0; position < sampler.num_batches(); ++position) {
              sampler.sequence_batch(position, batch);
              REQUIRE(batch == expected[static_cast<std::size_t>(position)]);
            }
          }
        }
      }
    }
  }
}
