// The weighted sampler: the shared invariants, its draws against the streams' own (written out
// here) and every build of the lanes that draw them, chi-square agreement with the weights, zero
// weights, invalid weights, weight updates, elastic resume; the class weight rule.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "class_test_support.hpp"
#include "sampling/class_plan.hpp"
#include "sampling/counter_lanes.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/class_weights.hpp"
#include "strider/sampling/weighted_sampler.hpp"

using namespace strider;
using strider::testing::blocks;

namespace {

WeightedSamplerConfig weighted_config(std::shared_ptr<const ClassIndex> classes, std::int64_t batch,
                                      std::vector<double> weights = {}, std::int64_t draws = 0,
                                      std::int64_t seed = 11) {
  WeightedSamplerConfig config;
  config.classes = std::move(classes);
  config.class_weights = std::move(weights);
  config.batch_size = batch;
  config.num_samples = draws;
  config.seed = seed;
  return config;
}

// Pearson's chi-square of observed counts against expected probabilities.
double chi_square(const std::vector<std::int64_t>& observed, const std::vector<double>& probabilities) {
  std::int64_t total = 0;
  for (std::int64_t count : observed) total += count;
  double statistic = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    const double expected = probabilities[i] * static_cast<double>(total);
    if (expected > 0)
      statistic +=
          (static_cast<double>(observed[i]) - expected) * (static_cast<double>(observed[i]) - expected) / expected;
  }
  return statistic;
}

}  // namespace

TEST_CASE("weighted sampler invariants", "[weighted][invariants]") {
  struct Case {
    std::vector<std::int64_t> counts;
    std::vector<double> weights;
    std::int64_t draws, batch;
    int world;
    bool drop_last;
  };
  const std::vector<Case> cases = {{{1000, 20, 5}, {}, 0, 8, 3, false},
                                   {{1000, 20, 5}, {1, 2, 0}, 333, 7, 4, false},
                                   {{7, 3, 0, 5}, {0.5, 1, 9, 2}, 50, 4, 3, true},
                                   {{40, 9, 1}, {}, 101, 0, 2, false},
                                   {{3, 3}, {1, 1}, 10, 1, 7, false}};
  for (const Case& c : cases) {
    CAPTURE(c.counts, c.weights, c.draws, c.batch, c.world, c.drop_last);
    const auto classes = blocks(c.counts);
    const strider::testing::SamplerFactory make = [&](int world, int rank) -> std::unique_ptr<Sampler> {
      auto config = weighted_config(classes, c.batch, c.weights, c.draws);
      config.drop_last = c.drop_last;
      return std::make_unique<WeightedSampler>(config, world, rank);
    };
    strider::testing::InvariantOptions options;
    options.world_size = c.world;
    strider::testing::check_sampler_invariants(make, options);
  }
}

TEST_CASE("weighted: class frequencies agree with the weights (chi-square, fixed seed)", "[weighted][statistics]") {
  const auto classes = blocks({1000, 200, 50, 10});
  const std::vector<double> weights = {1, 3, 10, 20};  // masses 1000 600 500 200
  const strider::testing::SamplerFactory make = [&](int world, int rank) -> std::unique_ptr<Sampler> {
    return std::make_unique<WeightedSampler>(weighted_config(classes, weights.empty() ? 0 : 64, weights, 100000), world,
                                             rank);
  };
  const auto counts = strider::testing::rank_class_counts(make, *classes, 4, 2);
  std::vector<std::int64_t> total(4, 0);
  for (const auto& rank_counts : counts)
    for (int label = 0; label < 4; ++label) total[label] += rank_counts[label];
  // P(class c) = w_c * count_c / sum_k w_k * count_k, written out: masses 1000, 600, 500, 200 of 2300.
  const std::vector<double> expected = {1000.0 / 2300, 600.0 / 2300, 500.0 / 2300, 200.0 / 2300};
  WeightedSampler probe(weighted_config(classes, 64, weights, 100000), 4, 0);
  for (int label = 0; label < 4; ++label) REQUIRE(probe.class_probability(label) == Approx(expected[label]));
  const double statistic = chi_square(total, expected);
  CAPTURE(total, statistic);
  REQUIRE(statistic < 16.27);  // chi-square, 3 degrees of freedom, p = 0.001

  // Within a class every member is equally likely: class 2's 50 samples (49 degrees of freedom).
  std::vector<std::int64_t> members(50, 0);
  for (int rank = 0; rank < 4; ++rank) {
    auto sampler = make(4, rank);
    sampler->set_epoch(2);
    for (const auto& batch : strider::testing::all_batches(*sampler))
      for (std::int64_t index : batch)
        if (classes->label(index) == 2) ++members[static_cast<std::size_t>(index - 1200)];
  }
  const double within = chi_square(members, std::vector<double>(50, 1.0 / 50));
  CAPTURE(within);
  REQUIRE(within < 85.35);  // 49 degrees of freedom, p = 0.001
}

TEST_CASE("weighted: default weights 1/count make every class equally likely", "[weighted][statistics]") {
  const auto classes = blocks({10000, 200, 50});
  WeightedSampler sampler(weighted_config(classes, 0), 1, 0);
  for (int label = 0; label < 3; ++label) REQUIRE(sampler.class_probability(label) == Approx(1.0 / 3).epsilon(1e-12));
  std::vector<std::int64_t> all;
  sampler.batch(0, all);
  REQUIRE(all.size() == 10250);
  const double statistic = chi_square(class_histogram(*classes, all), {1.0 / 3, 1.0 / 3, 1.0 / 3});
  CAPTURE(statistic);
  REQUIRE(statistic < 13.82);  // 2 degrees of freedom, p = 0.001
}

TEST_CASE("weighted: zero-weight classes never appear; per-sample weights", "[weighted]") {
  const auto classes = blocks({100, 100, 100});
  for (int world : {1, 3}) {
    const strider::testing::SamplerFactory make = [&](int w, int rank) -> std::unique_ptr<Sampler> {
      return std::make_unique<WeightedSampler>(weighted_config(classes, 16, {1, 0, 2}, 5000), w, rank);
    };
    const auto counts = strider::testing::rank_class_counts(make, *classes, world, 0);
    for (const auto& rank_counts : counts) {
      REQUIRE(rank_counts[1] == 0);
      REQUIRE(rank_counts[0] > 0);
      REQUIRE(rank_counts[2] > rank_counts[0]);
    }
  }
  // Per-sample weights: only the samples with a weight are drawn.
  auto sample_weights = std::make_shared<std::vector<double>>(300, 0.0);
  (*sample_weights)[7] = 1;
  (*sample_weights)[250] = 3;
  WeightedSamplerConfig config;
  config.sample_weights = sample_weights;
  config.num_samples = 4000;
  WeightedSampler sampler(config, 1, 0);
  std::vector<std::int64_t> all;
  sampler.batch(0, all);
  std::map<std::int64_t, std::int64_t> seen;
  for (std::int64_t index : all) ++seen[index];
  REQUIRE(seen.size() == 2);
  REQUIRE(seen[7] + seen[250] == 4000);
  REQUIRE(chi_square({seen[7], seen[250]}, {0.25, 0.75}) < 10.83);
}

namespace {

// The weighted sampler's draws at `positions`, written out from its definition with one
// detail::CounterStream per position: the stream (epoch key, position) draws a ticket below the
// quantised weights' total (each mass's share of 2^62, rounded, at least 1 where positive), which
// picks the first class (or sample) whose running sum is above it; then, with class weights, a
// member of that class below its count. `longest` gets the most words a ticket and a member took.
struct ReferenceDraws {
  std::vector<std::int64_t> samples;
  std::uint64_t longest_ticket = 0, longest_member = 0;
};
ReferenceDraws reference_draws(const ClassIndex* classes, const std::vector<double>& masses, std::int64_t seed,
                               std::int64_t epoch, const std::vector<std::int64_t>& positions) {
  double total = 0;
  for (double mass : masses) total += mass;
  std::vector<std::uint64_t> cumulative;
  std::uint64_t running = 0;
  for (double mass : masses) {
    if (mass > 0)
      running +=
          std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(mass / total * 4611686018427387904.0)));
    cumulative.push_back(running);
  }
  const std::uint64_t key = derive_seed(seed, epoch, 0x3e1947ed00000000ULL);
  ReferenceDraws draws;
  for (std::int64_t position : positions) {
    detail::CounterStream stream(key, static_cast<std::uint64_t>(position));
    const std::uint64_t ticket = stream.below(running);
    draws.longest_ticket = std::max(draws.longest_ticket, stream.drawn());
    const auto chosen = std::upper_bound(cumulative.begin(), cumulative.end(), ticket) - cumulative.begin();
    if (classes == nullptr) {
      draws.samples.push_back(chosen);
      continue;
    }
    const int label = static_cast<int>(chosen);
    const std::uint64_t before = stream.drawn();
    draws.samples.push_back(classes->members(label)[stream.below(static_cast<std::uint64_t>(classes->count(label)))]);
    draws.longest_member = std::max(draws.longest_member, stream.drawn() - before);
  }
  return draws;
}

// Rank `rank`'s positions of step `step`: s*R*B + r + j*R for its j-th sample (no padding: the
// draws are a multiple of the world size).
std::vector<std::int64_t> step_positions(std::int64_t step, int world, int rank, std::int64_t batch, std::size_t size) {
  std::vector<std::int64_t> positions;
  for (std::size_t j = 0; j < size; ++j)
    positions.push_back(step * world * batch + rank + static_cast<std::int64_t>(j) * world);
  return positions;
}

}  // namespace

TEST_CASE("weighted: every draw is the one its position's stream gives, written out in the test", "[weighted]") {
  struct Case {
    const char* what;
    std::vector<std::int64_t> counts;  // empty: per-sample weights
    std::vector<double> weights;       // class weights (empty: 1/count), or per-sample weights
    std::int64_t draws, batch;
    int world;
    bool past_the_lanes = false;  // some tickets and members take more words than the lanes draw at once
  };
  std::mt19937_64 generator(5);
  const auto random_weights = [&](std::size_t count) {
    std::vector<double> weights(count);
    for (double& weight : weights) weight = static_cast<double>(generator() % 1000) / 7.0;
    return weights;
  };
  std::vector<std::int64_t> many_counts(70, 30);
  many_counts[3] = 1;
  const std::vector<Case> cases = {
      // w4's shape, scaled down: the default weights' masses sum to just past 2^62, so that about
      // half of the tickets' words are rejected and some tickets take more than the 3 words the
      // lanes draw at once; the members' bounds reject from 2% to 45%.
      {"imbalanced, 1/count", {40293, 24155, 14481, 8681, 5204, 3120, 1870, 1121, 672, 403}, {}, 0, 256, 2, true},
      {"a class of one sample (its member draws no word), a batch not a multiple of the lanes",
       {1, 5000, 3, 2},
       {900, 1, 50, 30},
       6000,
       37,
       3},
      {"70 classes (a binary search for the class)", many_counts, {}, 8400, 64, 4},
      {"3,000 per-sample weights (a binary search for the sample)", {}, random_weights(3000), 9000, 100, 1},
      {"50 per-sample weights (the ticket table)", {}, random_weights(50), 4000, 64, 2}};
  for (const Case& c : cases) {
    CAPTURE(c.what);
    WeightedSamplerConfig config;
    std::vector<double> masses;
    std::shared_ptr<const ClassIndex> classes;
    if (c.counts.empty()) {
      config.sample_weights = std::make_shared<std::vector<double>>(c.weights);
      masses = c.weights;
    } else {
      classes = blocks(c.counts);
      config.classes = classes;
      config.class_weights = c.weights;
      for (std::size_t label = 0; label < c.counts.size(); ++label)
        masses.push_back((c.weights.empty() ? 1.0 / static_cast<double>(c.counts[label]) : c.weights[label]) *
                         static_cast<double>(c.counts[label]));
    }
    config.num_samples = c.draws;
    config.batch_size = c.batch;
    config.seed = 17;
    std::uint64_t longest_ticket = 0, longest_member = 0;
    for (int rank = 0; rank < c.world; ++rank) {
      WeightedSampler sampler(config, c.world, rank);
      for (const std::int64_t epoch : {0, 6}) {
        CAPTURE(rank, epoch);
        sampler.set_epoch(epoch);
        std::vector<std::int64_t> batch;
        std::int64_t differing = 0;
        for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
          sampler.batch(step, batch);
          const ReferenceDraws expected = reference_draws(classes.get(), masses, config.seed, epoch,
                                                          step_positions(step, c.world, rank, c.batch, batch.size()));
          differing += batch == expected.samples ? 0 : 1;
          longest_ticket = std::max(longest_ticket, expected.longest_ticket);
          longest_member = std::max(longest_member, expected.longest_member);
        }
        REQUIRE(differing == 0);
      }
    }
    // The draws went past the words the lanes take at once (3 for a ticket, 2 for a member).
    if (c.past_the_lanes) {
      REQUIRE(longest_ticket > 3);
      REQUIRE(longest_member > 2);
    }
  }
}

TEST_CASE("every build of the counter-stream lanes this CPU runs draws CounterStream's words and places",
          "[weighted][random]") {
  const std::vector<sampling_detail::CounterLaneBuild>& builds = sampling_detail::counter_lane_builds();
  REQUIRE(!builds.empty());
  REQUIRE(std::string(builds.back().name) == "baseline");  // the fallback is always there
  // Bounds of every kind: none to draw (0, 1), powers of two and just past them (half rejected),
  // 2^62 + 256 (the quantised weights' total of w4), the largest.
  const std::vector<std::uint64_t> kinds = {
      0, 1, 2, 3, 1000, 1024, 1025, (std::uint64_t{1} << 62) + 256, (std::uint64_t{1} << 63) + 1, ~std::uint64_t{0}};
  constexpr std::size_t kLanes = 61;  // not a multiple of any vector's lanes
  std::mt19937_64 generator(3);
  std::vector<std::int64_t> counters(kLanes);
  std::vector<std::uint64_t> states(kLanes), start(kLanes), bounds(kLanes), masks(kLanes);
  for (const sampling_detail::CounterLaneBuild& build : builds) {
    CAPTURE(build.name);
    for (int round = 0; round < 200; ++round) {
      for (std::size_t k = 0; k < kLanes; ++k) {
        counters[k] = static_cast<std::int64_t>(generator());
        start[k] = generator() % 5;
        bounds[k] = round % 2 == 0 ? kinds[(k + static_cast<std::size_t>(round)) % kinds.size()]
                                   : generator() >> (generator() % 64);
        masks[k] = detail::CounterStream::mask_of(bounds[k]);
      }
      const std::uint64_t key = generator();
      for (std::size_t n : {kLanes, std::size_t{9}, std::size_t{1}, std::size_t{0}}) {
        CAPTURE(round, n);
        std::fill(states.begin(), states.end(), 7);
        build.streams(key, counters.data(), states.data(), n);
        for (const int words : {2, 3}) {
          std::vector<std::uint64_t> drawn(start), values(kLanes, 7);
          (words == 2 ? build.below2 : build.below3)(states.data(), drawn.data(), bounds.data(), masks.data(),
                                                     values.data(), n);
          std::size_t differing = 0;
          for (std::size_t k = 0; k < n; ++k) {
            differing +=
                states[k] == detail::CounterStream::state_of(key, static_cast<std::uint64_t>(counters[k])) ? 0 : 1;
            detail::CounterStream stream = detail::CounterStream::resumed(states[k], start[k]);
            const std::uint64_t value = stream.below(bounds[k], masks[k]);
            if (stream.drawn() - start[k] <= static_cast<std::uint64_t>(words)) {  // taken among the lanes' words
              differing += values[k] == value && drawn[k] == stream.drawn() ? 0 : 1;
            } else {  // all rejected: every word counted, for the stream to draw on
              differing += values[k] >= bounds[k] && drawn[k] == start[k] + static_cast<std::uint64_t>(words) ? 0 : 1;
            }
          }
          for (std::size_t k = n; k < kLanes; ++k)  // lanes past n untouched
            differing += states[k] == 7 && values[k] == 7 && drawn[k] == start[k] ? 0 : 1;
          REQUIRE(differing == 0);
        }
      }
    }
  }
}

TEST_CASE("weighted: a few classes are drawn as many are (the ticket table against the binary search)", "[weighted]") {
  // The same five classes, once alone (up to 64 classes: a table of the tickets' top bits, then a
  // short scan) and once followed by 65 empty ones (more than 64: a binary search over the
  // cumulative weights). Empty classes add no weight, so every ticket, hence every sample, is the same.
  const std::vector<std::int64_t> counts = {3000, 200, 1, 750, 40};
  const std::vector<double> weights = {0.3, 1.0, 2.0, 0.5, 4.0};
  std::vector<std::int64_t> many_counts = counts;
  many_counts.resize(70, 0);
  std::vector<double> many_weights = weights;
  many_weights.resize(70, 1.0);
  for (const std::int64_t epoch : {0, 3}) {
    CAPTURE(epoch);
    WeightedSampler few(weighted_config(blocks(counts), 64, weights, 20000), 1, 0);
    WeightedSampler many(weighted_config(blocks(many_counts), 64, many_weights, 20000), 1, 0);
    few.set_epoch(epoch);
    many.set_epoch(epoch);
    REQUIRE(few.num_steps() == many.num_steps());
    std::vector<std::int64_t> a, b;
    std::int64_t differ = 0;
    for (std::int64_t step = 0; step < few.num_steps(); ++step) {
      few.batch(step, a);
      many.batch(step, b);
      differ += a == b ? 0 : 1;
    }
    REQUIRE(differ == 0);
  }
}

TEST_CASE("weighted: invalid weights are usage errors", "[weighted][errors]") {
  const auto classes = blocks({10, 10});
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& bad :
       std::vector<std::vector<double>>{{-1, 1}, {nan, 1}, {inf, 1}, {0, 0}, {1}, {1, 1, 1}}) {
    CAPTURE(bad);
    REQUIRE_THROWS_AS(WeightedSampler(weighted_config(classes, 2, bad), 2, 0), UsageError);
  }
  // A positive weight only on an empty class is all zero too.
  REQUIRE_THROWS_AS(WeightedSampler(weighted_config(blocks({10, 0}), 2, {0, 1}), 1, 0), UsageError);
  REQUIRE_THROWS_AS(WeightedSampler(weighted_config(classes, 2, {}, -5), 1, 0), UsageError);
  REQUIRE_THROWS_AS(WeightedSampler(WeightedSamplerConfig{}, 1, 0), UsageError);
  WeightedSampler sampler(weighted_config(classes, 2, {1, 1}), 1, 0);
  REQUIRE_THROWS_AS(sampler.set_class_weights({1, nan}), UsageError);
  REQUIRE(sampler.class_weights() == std::vector<double>{1, 1});  // unchanged after a failed update
  // Weights whose masses are finite but whose sum is not fail late, after the weights were hashed:
  // the sampler still draws and names itself as before.
  const std::uint64_t hash_before = sampler.config_hash(), plan_before = plan_hash(sampler);
  REQUIRE_THROWS_AS(sampler.set_class_weights({1.7e307, 1.7e307}), UsageError);
  REQUIRE(sampler.class_weights() == std::vector<double>{1, 1});
  REQUIRE(sampler.config_hash() == hash_before);
  REQUIRE(plan_hash(sampler) == plan_before);
}

TEST_CASE("weighted: new weights change the plan and the config hash", "[weighted]") {
  const auto classes = blocks({50, 50});
  WeightedSampler sampler(weighted_config(classes, 10, {1, 1}, 100), 2, 1);
  const std::uint64_t before_plan = plan_hash(sampler), before_config = sampler.config_hash();
  sampler.set_class_weights({1, 4});
  REQUIRE(plan_hash(sampler) != before_plan);
  REQUIRE(sampler.config_hash() != before_config);
  WeightedSampler again(weighted_config(classes, 10, {1, 4}, 100), 2, 1);
  REQUIRE(plan_hash(again) == plan_hash(sampler));
  REQUIRE(again.config_hash() == sampler.config_hash());
  REQUIRE(again.config_hash() !=
          WeightedSampler(weighted_config(blocks({49, 51}), 10, {1, 4}, 100), 2, 1).config_hash());
}

TEST_CASE("weighted: elastic resume keeps every global batch", "[weighted][elastic]") {
  const auto classes = blocks({500, 40, 9});
  strider::testing::check_elastic(
      [&](int world, int rank, std::int64_t batch) -> std::unique_ptr<Sampler> {
        return std::make_unique<WeightedSampler>(weighted_config(classes, batch, {}, 480), world, rank);
      },
      24, {1, 2, 3, 4, 6, 8}, 2);
}

TEST_CASE("class weight rule: w *= 1 - metric, renormalised, floored", "[weighted][class_weights]") {
  const std::vector<double> weights = {1, 1, 1, 1};
  const auto updated = apply_class_weight_rule(weights, {0.5, 0.0, 1.0, 0.75});
  // 0.5, 1, floor 0.01, 0.25 -> sum 1.76 -> scaled to 4.
  REQUIRE(updated[0] == Approx(0.5 * 4 / 1.76));
  REQUIRE(updated[1] == Approx(1.0 * 4 / 1.76));
  REQUIRE(updated[2] == Approx(0.01 * 4 / 1.76));
  REQUIRE(updated[3] == Approx(0.25 * 4 / 1.76));
  // Perfect metrics everywhere: all at the floor, renormalised: equal weights.
  const auto flat = apply_class_weight_rule({2, 6}, {1, 1});
  REQUIRE(flat[0] == Approx(4));
  REQUIRE(flat[1] == Approx(4));
  REQUIRE_THROWS_AS(apply_class_weight_rule(weights, {0.5, 0.5}), UsageError);
  REQUIRE_THROWS_AS(apply_class_weight_rule(weights, {0.5, 0.5, 1.5, 0}), UsageError);
  REQUIRE_THROWS_AS(apply_class_weight_rule(weights, {0.5, std::nan(""), 0, 0}), UsageError);
  REQUIRE_THROWS_AS(apply_class_weight_rule({-1, 1, 1, 1}, {0, 0, 0, 0}), UsageError);
}

TEST_CASE("weighted: positions beyond 2^32 keep all 64 bits", "[weighted][int64]") {
  const auto classes = blocks({7, 5, 3});
  const std::int64_t draws = std::int64_t{1} << 40;
  const int world = 8, rank = 5;
  const std::int64_t per_rank_batch = 4;
  WeightedSampler sampler(weighted_config(classes, per_rank_batch, {}, draws), world, rank);
  WeightedSampler twin(weighted_config(classes, per_rank_batch, {}, draws), world, rank);
  const std::int64_t step = (std::int64_t{1} << 33) / 4;
  std::vector<std::int64_t> batch, again, other, low;
  sampler.batch(step, batch);
  twin.batch(step, again);
  REQUIRE(batch == again);
  REQUIRE(batch.size() == 4);
  for (std::int64_t index : batch) REQUIRE((index >= 0 && index < 15));

  // Rank r's j-th sample of step s sits at global position s*R*B + r + j*R (2^36 + 5 + 8j here),
  // written out in the test: the batch holds exactly the samples drawn at those positions.
  const std::int64_t first_position = step * world * per_rank_batch + rank;
  REQUIRE(first_position == (std::int64_t{1} << 36) + 5);
  for (std::int64_t j = 0; j < per_rank_batch; ++j) REQUIRE(batch[j] == sampler.sample_at(first_position + j * world));

  // Positions that agree in their low 32 bits draw different samples. Truncated to 32 bits, the
  // positions of `step`, of the step 2^35 positions further and of step 0 would all be 5 + 8j, and the
  // three batches would be equal; four draws from 15 samples coincide by chance with probability
  // below 1e-3, and the seed is fixed.
  sampler.batch(step + (std::int64_t{1} << 30), other);
  sampler.batch(0, low);
  REQUIRE(other.size() == 4);
  REQUIRE(other != batch);
  REQUIRE(low != batch);
  std::vector<std::int64_t> far_draws, near_draws;
  for (std::int64_t k = 0; k < 16; ++k) {
    far_draws.push_back(sampler.sample_at((std::int64_t{1} << 36) + k));
    near_draws.push_back(sampler.sample_at(k));
  }
  for (std::int64_t index : far_draws) REQUIRE((index >= 0 && index < 15));
  REQUIRE(far_draws != near_draws);
  REQUIRE(sampler.consumed_after(step) == step * 32);
  REQUIRE(sampler.step_for_consumed(step * 32) == step);
}
