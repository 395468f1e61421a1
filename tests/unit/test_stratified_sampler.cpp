// The stratified sampler: the shared invariants, every global and per-rank batch within one sample
// of the target, cycling, elastic resume, bad options.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>

#include "class_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/sampling/stratified_sampler.hpp"

using namespace strider;
using strider::testing::blocks;

namespace {

StratifiedSamplerConfig stratified_config(std::shared_ptr<const ClassIndex> classes, std::int64_t batch,
                                          const std::string& target = "freq", std::int64_t draws = 0,
                                          std::int64_t seed = 3) {
  StratifiedSamplerConfig config;
  config.classes = std::move(classes);
  config.batch_size = batch;
  config.num_samples = draws;
  config.seed = seed;
  parse_stratify_target(target, config);
  return config;
}

/// The target proportions written out from the class counts, independently of the sampler: "freq"
/// count_c / N, "uniform" 1/K' on each of the K' non-empty classes, weights w_c / sum_k w_k.
std::vector<double> target_proportions(const std::vector<std::int64_t>& counts, const std::string& target) {
  std::vector<double> proportions(counts.size(), 0.0);
  if (target == "freq" || target == "uniform") {
    double total = 0.0, non_empty = 0.0;
    for (std::int64_t count : counts) total += static_cast<double>(count), non_empty += count > 0 ? 1.0 : 0.0;
    for (std::size_t c = 0; c < counts.size(); ++c)
      if (counts[c] > 0) proportions[c] = target == "freq" ? static_cast<double>(counts[c]) / total : 1.0 / non_empty;
    return proportions;
  }
  std::vector<double> weights;
  std::stringstream text(target);
  for (std::string item; std::getline(text, item, ',');) weights.push_back(std::stod(item));
  REQUIRE(weights.size() == counts.size());
  double sum = 0.0;
  for (double weight : weights) sum += weight;
  for (std::size_t c = 0; c < counts.size(); ++c) proportions[c] = weights[c] / sum;
  return proportions;
}

// Every rank's batch of B and every global batch of R*B within one sample of the target, at every
// step; a class whose per-rank share is at least one sample is in every rank's batch.
void check_batches_follow_target(const std::vector<std::int64_t>& class_counts, const std::string& target,
                                 std::int64_t batch_size, std::int64_t draws, int world) {
  const auto classes = blocks(class_counts);
  const StratifiedSamplerConfig config = stratified_config(classes, batch_size, target, draws);
  const std::vector<double> proportions = target_proportions(class_counts, target);
  std::vector<std::unique_ptr<StratifiedSampler>> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.push_back(std::make_unique<StratifiedSampler>(config, world, rank));
    ranks.back()->set_epoch(4);
  }
  const StratifiedSampler& first = *ranks[0];
  REQUIRE(first.num_steps() > 0);
  std::vector<std::int64_t> batch;
  for (std::int64_t step = 0; step < first.num_steps(); ++step) {
    std::vector<std::int64_t> global(class_counts.size(), 0);
    for (int rank = 0; rank < world; ++rank) {
      ranks[rank]->batch(step, batch);
      REQUIRE(static_cast<std::int64_t>(batch.size()) == batch_size);
      const auto counts = class_histogram(*classes, batch);
      for (std::size_t label = 0; label < class_counts.size(); ++label) {
        const double target_count = proportions[label] * static_cast<double>(batch_size);
        CAPTURE(world, step, rank, label, counts[label], target_count);
        REQUIRE(std::abs(static_cast<double>(counts[label]) - target_count) < 1.0 + 1e-9);
        if (target_count >= 1) REQUIRE(counts[label] >= 1);
        global[label] += counts[label];
      }
    }
    for (std::size_t label = 0; label < class_counts.size(); ++label) {
      const double target_count = proportions[label] * static_cast<double>(world * batch_size);
      CAPTURE(world, step, label, global[label], target_count);
      REQUIRE(std::abs(static_cast<double>(global[label]) - target_count) < 1.0 + 1e-9);
      REQUIRE(global[label] == first.global_count(step, static_cast<int>(label)));
    }
  }
}

}  // namespace

TEST_CASE("stratified sampler invariants", "[stratified][invariants]") {
  struct Case {
    std::vector<std::int64_t> counts;
    std::string target;
    std::int64_t draws, batch;
    int world;
    bool shuffle, drop_last;
  };
  const std::vector<Case> cases = {
      {{1000, 20, 5}, "freq", 0, 8, 3, true, false},      {{1000, 20, 5}, "uniform", 0, 6, 4, true, false},
      {{7, 3, 0, 5}, "1,2,0,1", 40, 3, 3, true, true},    {{40, 9, 1}, "uniform", 101, 3, 2, false, false},
      {{100, 1, 30, 7, 2}, "freq", 0, 5, 7, true, false}, {{50, 50}, "freq", 0, 0, 3, true, false}};
  for (const Case& c : cases) {
    CAPTURE(c.counts, c.target, c.draws, c.batch, c.world, c.shuffle, c.drop_last);
    const auto classes = blocks(c.counts);
    const strider::testing::SamplerFactory make = [&](int world, int rank) -> std::unique_ptr<Sampler> {
      auto config = stratified_config(classes, c.batch, c.target, c.draws);
      config.shuffle = c.shuffle;
      config.drop_last = c.drop_last;
      return std::make_unique<StratifiedSampler>(config, world, rank);
    };
    strider::testing::InvariantOptions options;
    options.world_size = c.world;
    options.epoch_sensitive = c.shuffle;
    strider::testing::check_sampler_invariants(make, options);
  }
}

TEST_CASE("stratified: every batch within one sample of the target, on every rank", "[stratified]") {
  for (const std::string target : {"freq", "uniform", "5,3,2"}) {
    for (int world : {1, 3, 8}) {
      CAPTURE(target, world);
      check_batches_follow_target({10000, 200, 50}, target, 16, 0, world);
    }
  }
  check_batches_follow_target({13, 7, 0, 29, 1}, "uniform", 5, 200, 3);
  check_batches_follow_target({13, 7, 0, 29, 1}, "freq", 4, 0, 2);
  check_batches_follow_target({13, 7, 0, 29, 1}, "1,0,0,2,1", 4, 0, 2);
  // The proportions the sampler reports are the ones written out above.
  const auto classes = blocks({13, 7, 0, 29, 1});
  for (const std::string target : {"freq", "uniform", "1,0,0,2,1"}) {
    const StratifiedSampler sampler(stratified_config(classes, 5, target), 1, 0);
    const std::vector<double> proportions = target_proportions({13, 7, 0, 29, 1}, target);
    for (int label = 0; label < 5; ++label) REQUIRE(sampler.target_proportion(label) == Approx(proportions[label]));
  }
}

TEST_CASE("stratified: the epoch follows the target and cycles a class that runs out", "[stratified]") {
  const auto classes = blocks({900, 90, 10});
  StratifiedSampler sampler(stratified_config(classes, 100, "uniform"), 1, 0);  // 10 steps of 100
  REQUIRE(sampler.num_steps() == 10);
  std::vector<std::int64_t> epoch_counts(3, 0), seen(1000, 0), batch;
  for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
    sampler.batch(step, batch);
    const auto counts = class_histogram(*classes, batch);
    for (int label = 0; label < 3; ++label) epoch_counts[label] += counts[label];
    for (std::int64_t index : batch) ++seen[index];
  }
  for (int label = 0; label < 3; ++label) REQUIRE(std::abs(epoch_counts[label] - 1000 / 3) <= 1);
  // Class 2 (10 samples, ~333 draws) is cycled: each of its samples 33 or 34 times.
  for (std::int64_t index = 990; index < 1000; ++index) REQUIRE((seen[index] == 33 || seen[index] == 34));
  // Class 0 (900 samples, ~333 draws) is not exhausted: no repeats.
  for (std::int64_t index = 0; index < 900; ++index) REQUIRE(seen[index] <= 1);
}

TEST_CASE("stratified: elastic resume keeps every global batch", "[stratified][elastic]") {
  const auto classes = blocks({500, 40, 9});
  strider::testing::check_elastic(
      [&](int world, int rank, std::int64_t batch) -> std::unique_ptr<Sampler> {
        return std::make_unique<StratifiedSampler>(stratified_config(classes, batch, "freq"), world, rank);
      },
      24, {1, 2, 3, 4, 6, 8}, 2);
}

TEST_CASE("stratified: bad options are usage errors", "[stratified][errors]") {
  const auto classes = blocks({10, 10, 10});
  StratifiedSamplerConfig config;
  REQUIRE_THROWS_AS(parse_stratify_target("often", config), UsageError);
  REQUIRE_THROWS_AS(parse_stratify_target("1,,2", config), UsageError);
  REQUIRE_THROWS_AS(StratifiedSampler(config, 1, 0), UsageError);                                // no labels
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 2), 1, 0), UsageError);         // B < K
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 3, "1,2"), 1, 0), UsageError);  // wrong count
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 3, "1,-2,1"), 1, 0), UsageError);
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 3, "0,0,0"), 1, 0), UsageError);
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 3, "1,nan,1"), 1, 0), UsageError);
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 3, "1,inf,1"), 1, 0), UsageError);
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(blocks({10, 0}), 3, "1,1"), 1, 0), UsageError);  // empty class
  REQUIRE_THROWS_AS(StratifiedSampler(stratified_config(classes, 3, "freq", -1), 1, 0), UsageError);
  // A zero weight leaves the class out: two classes fit a batch of 2.
  StratifiedSampler two(stratified_config(classes, 2, "1,0,1"), 1, 0);
  REQUIRE(two.classes_in_use() == std::vector<int>{0, 2});
  REQUIRE(two.config_hash() != StratifiedSampler(stratified_config(classes, 2, "1,0,2"), 1, 0).config_hash());
}
