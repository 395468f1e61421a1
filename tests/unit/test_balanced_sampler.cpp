// The balanced sampler: the shared invariants, per-rank class balance, targets, elastic resume.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "class_test_support.hpp"
#include "sampling/class_plan.hpp"
#include "strider/core/error.hpp"
#include "strider/sampling/balanced_sampler.hpp"

using namespace strider;
using strider::testing::blocks;

namespace {

BalancedSamplerConfig balanced_config(std::shared_ptr<const ClassIndex> classes, std::int64_t batch,
                                      const std::string& balance = "max", std::int64_t seed = 5) {
  BalancedSamplerConfig config;
  config.classes = std::move(classes);
  config.batch_size = batch;
  config.seed = seed;
  parse_balance(balance, config);
  return config;
}

}  // namespace

TEST_CASE("balanced sampler invariants", "[balanced][invariants]") {
  struct Case {
    std::vector<std::int64_t> counts;
    std::int64_t batch;
    int world;
    std::string balance;
    bool shuffle, drop_last;
  };
  const std::vector<Case> cases = {
      {{1000, 20, 5}, 8, 3, "max", true, false},      {{1000, 20, 5}, 8, 4, "min", true, false},
      {{7, 3, 0, 5}, 2, 3, "max", true, false},       {{7, 3, 0, 5}, 4, 2, "25", true, true},
      {{50, 50}, 0, 3, "max", true, false},           {{40, 9, 1}, 5, 3, "max", false, false},
      {{100, 1, 30, 7, 2}, 3, 7, "max", true, false}, {{5, 12, 40}, 4, 3, "max", true, false},
      {{5, 12, 0, 40}, 4, 2, "min", true, true}};
  for (const Case& c : cases) {
    CAPTURE(c.counts, c.batch, c.world, c.balance, c.shuffle, c.drop_last);
    const auto classes = blocks(c.counts);
    const strider::testing::SamplerFactory make = [&](int world, int rank) -> std::unique_ptr<Sampler> {
      auto config = balanced_config(classes, c.batch, c.balance);
      config.shuffle = c.shuffle;
      config.drop_last = c.drop_last;
      return std::make_unique<BalancedSampler>(config, world, rank);
    };
    strider::testing::InvariantOptions options;
    options.world_size = c.world;
    options.epoch_sensitive = c.shuffle;
    strider::testing::check_sampler_invariants(make, options);

    // T and the classes in use written out from the counts: "max" is the largest count, "min" the
    // smallest non-empty one, a number is itself; empty classes are skipped.
    std::int64_t largest = 0, smallest = 0, in_use = 0;
    for (std::int64_t count : c.counts) {
      if (count == 0) continue;
      largest = std::max(largest, count);
      smallest = in_use == 0 ? count : std::min(smallest, count);
      ++in_use;
    }
    const std::int64_t target = c.balance == "max" ? largest : c.balance == "min" ? smallest : std::stoll(c.balance);
    // The epoch holds K*T occurrences in global batches of G = R*B: ceil(K*T/G) steps (floor with
    // drop_last).
    if (c.batch > 0) {
      const std::int64_t global = c.world * c.batch;
      const std::int64_t steps = c.drop_last ? in_use * target / global : (in_use * target + global - 1) / global;
      REQUIRE(make(c.world, 0)->num_steps() == steps);
    }
    // Every non-empty class gets at least T occurrences (without drop_last); every index is one of
    // the class's samples, and empty classes never appear.
    std::map<int, std::int64_t> per_class;
    for (const auto& [index, count] : strider::testing::index_counts(make, c.world, 1)) {
      REQUIRE(index >= 0);
      REQUIRE(index < classes->size());
      per_class[classes->label(index)] += count;
    }
    for (std::size_t label = 0; label < c.counts.size(); ++label) {
      CAPTURE(label, target);
      if (c.counts[label] == 0) REQUIRE(per_class[static_cast<int>(label)] == 0);
      if (c.counts[label] > 0 && !c.drop_last) REQUIRE(per_class[static_cast<int>(label)] >= target);
    }
  }
}

TEST_CASE("balanced: 10000/200/50 on 8 ranks, every rank within one of every class", "[balanced]") {
  const auto classes = blocks({10000, 200, 50});
  for (std::int64_t batch : {32, 7, 1}) {
    CAPTURE(batch);
    const strider::testing::SamplerFactory make = [&](int world, int rank) -> std::unique_ptr<Sampler> {
      return std::make_unique<BalancedSampler>(balanced_config(classes, batch), world, rank);
    };
    const auto counts = strider::testing::rank_class_counts(make, *classes, 8, 3);
    for (int label = 0; label < 3; ++label) {
      std::int64_t low = counts[0][label], high = counts[0][label];
      for (const auto& rank_counts : counts) {
        low = std::min(low, rank_counts[label]);
        high = std::max(high, rank_counts[label]);
      }
      CAPTURE(label, low, high);
      REQUIRE(high - low <= 1);
      REQUIRE(low >= 10000 / 8);  // every class on every rank, oversampled to the largest count
    }
  }
}

TEST_CASE("balanced: per-rank class counts stay within one after every step", "[balanced]") {
  const auto classes = blocks({300, 17, 5, 60});
  for (int world : {2, 3, 5}) {
    std::vector<std::vector<std::int64_t>> running(static_cast<std::size_t>(world), std::vector<std::int64_t>(4, 0));
    std::vector<std::unique_ptr<BalancedSampler>> ranks;
    for (int rank = 0; rank < world; ++rank)
      ranks.push_back(std::make_unique<BalancedSampler>(balanced_config(classes, 3), world, rank));
    std::vector<std::int64_t> batch;
    for (std::int64_t step = 0; step < ranks[0]->num_steps(); ++step) {
      for (int rank = 0; rank < world; ++rank) {
        ranks[rank]->batch(step, batch);
        for (std::int64_t index : batch) ++running[rank][classes->label(index)];
      }
      for (int label = 0; label < 4; ++label) {
        std::int64_t low = running[0][label], high = low;
        for (const auto& counts : running) low = std::min(low, counts[label]), high = std::max(high, counts[label]);
        CAPTURE(world, step, label);
        REQUIRE(high - low <= 1);
      }
    }
  }
}

TEST_CASE("balanced: each step's batch is put in an order of its own", "[balanced]") {
  // Four classes of equal size and a batch of 16: every batch holds 4 of each class, dealt class by
  // class, then shuffled with a seed of its step (and rank). The classes' order by position differs
  // from step to step; one permutation for every step would repeat it.
  const auto classes = blocks({400, 400, 400, 400});
  BalancedSampler sampler(balanced_config(classes, 16), 2, 1);
  sampler.set_epoch(3);
  std::set<std::vector<std::int32_t>> orders;
  std::vector<std::int64_t> batch;
  for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
    sampler.batch(step, batch);
    REQUIRE(batch.size() == 16);
    std::vector<std::int32_t> labels;
    for (std::int64_t index : batch) labels.push_back(classes->label(index));
    orders.insert(labels);
  }
  REQUIRE(sampler.num_steps() >= 20);
  // 16! / (4!)^4 = 63,063,000 orders of 4 x 4 labels: 20 independent ones repeat with odds near 0.
  REQUIRE(orders.size() >= static_cast<std::size_t>(sampler.num_steps()) - 1);
}

TEST_CASE("balanced: targets max, min and a count; oversampling repeats samples evenly", "[balanced]") {
  const auto classes = blocks({90, 12, 4});
  BalancedSampler by_max(balanced_config(classes, 0, "max"), 1, 0);
  BalancedSampler by_min(balanced_config(classes, 0, "min"), 1, 0);
  BalancedSampler by_count(balanced_config(classes, 0, "40"), 1, 0);
  REQUIRE(by_max.per_class_target() == 90);
  REQUIRE(by_min.per_class_target() == 4);
  REQUIRE(by_count.per_class_target() == 40);
  // One batch of exactly 3*T: every class exactly T times; the largest class covered exactly once.
  std::vector<std::int64_t> all;
  by_max.batch(0, all);
  REQUIRE(all.size() == 270);
  std::map<std::int64_t, std::int64_t> times;
  for (std::int64_t index : all) ++times[index];
  for (std::int64_t index = 0; index < 90; ++index) REQUIRE(times[index] == 1);
  for (std::int64_t index = 90; index < 102; ++index) REQUIRE((times[index] == 7 || times[index] == 8));  // 90/12
  for (std::int64_t index = 102; index < 106; ++index) REQUIRE((times[index] == 22 || times[index] == 23));
  // Undersampling: 4 distinct samples of each class.
  by_min.batch(0, all);
  REQUIRE(all.size() == 12);
  REQUIRE(std::set<std::int64_t>(all.begin(), all.end()).size() == 12);
}

TEST_CASE("balanced: elastic resume keeps every global batch", "[balanced][elastic]") {
  const auto classes = blocks({500, 40, 9});
  strider::testing::check_elastic(
      [&](int world, int rank, std::int64_t batch) -> std::unique_ptr<Sampler> {
        return std::make_unique<BalancedSampler>(balanced_config(classes, batch), world, rank);
      },
      24, {1, 2, 3, 4, 6, 8}, 2);
}

TEST_CASE("balanced: the config hash covers labels and options", "[balanced]") {
  const auto a = blocks({10, 5}), b = blocks({9, 6});
  BalancedSampler base(balanced_config(a, 2), 2, 0);
  REQUIRE(base.config_hash() == BalancedSampler(balanced_config(a, 4), 1, 0).config_hash());  // not B or R
  REQUIRE(base.config_hash() != BalancedSampler(balanced_config(b, 2), 2, 0).config_hash());
  REQUIRE(base.config_hash() != BalancedSampler(balanced_config(a, 2, "min"), 2, 0).config_hash());
  REQUIRE(base.config_hash() != BalancedSampler(balanced_config(a, 2, "max", 6), 2, 0).config_hash());
}

TEST_CASE("balanced: bad options are usage errors", "[balanced][errors]") {
  BalancedSamplerConfig config;
  REQUIRE_THROWS_AS(parse_balance("mean", config), UsageError);
  REQUIRE_THROWS_AS(parse_balance("0", config), UsageError);
  REQUIRE_THROWS_AS(parse_balance("-3", config), UsageError);
  REQUIRE_THROWS_AS(BalancedSampler(config, 2, 0), UsageError);  // no labels
  REQUIRE_THROWS_AS(BalancedSampler(balanced_config(blocks({3, 4}), -1), 2, 0), UsageError);
  REQUIRE_THROWS_AS(BalancedSampler(balanced_config(blocks({3, 4}), 1), 2, 2), UsageError);
  REQUIRE_THROWS_AS(ClassIndex(std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{0, -1})),
                    UsageError);
  REQUIRE_THROWS_AS(ClassIndex(std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{0, 3}), 2),
                    UsageError);
}

TEST_CASE("class index: counting sort groups samples by class in index order", "[balanced][class_index]") {
  const auto labels = std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{2, 0, 2, 1, 0, 2});
  ClassIndex index(labels);
  REQUIRE(index.num_classes() == 3);
  REQUIRE(index.size() == 6);
  REQUIRE(std::vector<std::int64_t>(index.members(0), index.members(0) + index.count(0)) ==
          std::vector<std::int64_t>{1, 4});
  REQUIRE(std::vector<std::int64_t>(index.members(2), index.members(2) + index.count(2)) ==
          std::vector<std::int64_t>{0, 2, 5});
  REQUIRE(ClassIndex(labels, 5).num_classes() == 5);
  REQUIRE(ClassIndex(labels, 5).count(4) == 0);
  REQUIRE(ClassIndex(labels, 5).labels_hash() != index.labels_hash());
  REQUIRE(class_histogram(index, {0, 1, 2, 2}) == std::vector<std::int64_t>{1, 0, 3});
  // Labels must lie in [0, num_classes): the largest label 2 needs at least 3 classes.
  REQUIRE_THROWS_WITH(ClassIndex(labels, 2), Catch::Contains("label 2 of sample 0 is outside [0, 2)"));
  REQUIRE_THROWS_AS(ClassIndex(std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{0, -1})),
                    UsageError);
}

TEST_CASE("class index: one built elsewhere by sort_into is the same index", "[balanced][class_index]") {
  // What the Loader does for a node: K from classes_of, the lists written by sort_into into memory
  // of its own, an index over them.
  const auto labels = std::make_shared<const std::vector<std::int32_t>>(
      std::vector<std::int32_t>{2, 0, 2, 1, 0, 2, 4, 4, 0, 1, 2, 0, 0});
  const ClassIndex built(labels);
  const int classes = ClassIndex::classes_of(labels);
  REQUIRE(classes == 5);
  auto offsets = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(classes) + 1, -7);
  auto sorted = std::make_shared<std::vector<std::int64_t>>(labels->size(), -7);
  ClassIndex::sort_into(labels, classes, offsets->data(), sorted->data());
  const ClassIndex shared(labels, offsets, sorted);
  REQUIRE(shared.num_classes() == built.num_classes());
  REQUIRE(shared.labels_hash() == built.labels_hash());
  for (int label = 0; label < classes; ++label) {
    CAPTURE(label);
    REQUIRE(shared.count(label) == built.count(label));
    REQUIRE(std::vector<std::int64_t>(shared.members(label), shared.members(label) + shared.count(label)) ==
            std::vector<std::int64_t>(built.members(label), built.members(label) + built.count(label)));
  }
  REQUIRE(shared.count(3) == 0);
  REQUIRE(std::vector<std::int64_t>(shared.members(0), shared.members(0) + shared.count(0)) ==
          std::vector<std::int64_t>{1, 4, 8, 11, 12});
  REQUIRE_THROWS_AS(
      ClassIndex::classes_of(std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{0, -1})),
      UsageError);
  REQUIRE_THROWS_AS(ClassIndex(labels, offsets, std::make_shared<std::vector<std::int64_t>>(3)), UsageError);
}

TEST_CASE("class cycler: every pass holds the class once; shuffled passes start at fresh offsets",
          "[balanced][class_index]") {
  // Class 0 has the 5 samples {0, 2, 3, 5, 6}; its occurrences 0..99 are 20 passes over them.
  const auto labels = std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{0, 1, 0, 0, 1, 0, 0});
  const ClassIndex index(labels);
  const std::vector<std::int64_t> members = {0, 2, 3, 5, 6};
  for (const bool shuffle : {true, false}) {
    CAPTURE(shuffle);
    detail::ClassCycler cycler;
    cycler.build(index, shuffle, 11, 2, 0x1234);
    std::set<std::vector<std::int64_t>> orders;
    for (std::int64_t pass = 0; pass < 20; ++pass) {
      std::vector<std::int64_t> order;
      for (std::int64_t j = 0; j < 5; ++j) order.push_back(cycler.sample(0, pass * 5 + j));
      if (!shuffle) REQUIRE(order == members);
      std::sort(order.begin(), order.end());
      REQUIRE(order == members);
      for (std::int64_t j = 0; j < 5; ++j) order[static_cast<std::size_t>(j)] = cycler.sample(0, pass * 5 + j);
      orders.insert(order);
    }
    // Shuffled, a pass is the first pass's order rotated by an offset drawn per pass (5 possible):
    // 20 passes in at most 2 orders would be a chance below 1e-8. In index order every pass is alike.
    if (shuffle)
      REQUIRE(orders.size() >= 3);
    else
      REQUIRE(orders.size() == 1);
  }
}

TEST_CASE("balanced: targets beyond 2^32 keep all 64 bits", "[balanced][int64]") {
  const auto classes = blocks({7, 5, 3});
  const std::int64_t target = std::int64_t{1} << 35;
  std::vector<std::vector<std::int64_t>> batches;
  for (int rank = 0; rank < 4; ++rank) {
    BalancedSampler sampler(balanced_config(classes, 6, std::to_string(target)), 4, rank);
    REQUIRE(sampler.num_steps() == 3 * target / 24);
    batches.emplace_back();
    sampler.batch(sampler.num_steps() - 1, batches.back());
    REQUIRE(batches.back().size() == 6);
  }
  // The last global batch still holds every class 8 times (24 / 3), 2 on every rank.
  for (const auto& batch : batches) REQUIRE(class_histogram(*classes, batch) == std::vector<std::int64_t>{2, 2, 2});
}

TEST_CASE("balanced: every global batch holds every class within one of R*B/K", "[balanced][global_batch]") {
  // Many configurations, drawn with a fixed seed: rare classes (1 or 2 samples), empty classes, K not
  // dividing R*B, every target and drop_last. The bound is computed here: with G = R*B and K classes
  // that have samples, a class's count n in a global batch must satisfy |n - G/K| < 1, i.e.
  // G - K < n*K < G + K; an empty class never appears.
  std::mt19937_64 engine(2024);
  const auto draw = [&](std::int64_t low, std::int64_t high) {
    return low + static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(high - low + 1));
  };
  int configurations = 0;
  for (int round = 0; round < 250; ++round) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(draw(1, 7)));
    for (std::int64_t& count : counts) {
      const std::int64_t kind = draw(0, 5);
      count = kind == 0 ? 0 : kind == 1 ? draw(1, 2) : draw(3, 300);
    }
    if (std::all_of(counts.begin(), counts.end(), [](std::int64_t c) { return c == 0; })) counts[0] = 5;
    const int world = static_cast<int>(draw(1, 8));
    const std::int64_t batch = draw(1, 13);
    const std::string balance = round % 3 == 0 ? "max" : round % 3 == 1 ? "min" : std::to_string(draw(1, 500));
    const bool drop_last = round % 4 == 3;
    const std::int64_t classes_with_samples =
        std::count_if(counts.begin(), counts.end(), [](std::int64_t c) { return c > 0; });
    const std::int64_t global = world * batch;
    CAPTURE(counts, world, batch, balance, drop_last);
    const auto classes = blocks(counts);
    std::vector<std::unique_ptr<BalancedSampler>> ranks;
    for (int rank = 0; rank < world; ++rank) {
      auto config = balanced_config(classes, batch, balance, 7 + round);
      config.drop_last = drop_last;
      ranks.push_back(std::make_unique<BalancedSampler>(config, world, rank));
      ranks.back()->set_epoch(round % 5);
    }
    std::vector<std::int64_t> mine, all;
    for (std::int64_t step = 0; step < ranks[0]->num_steps(); ++step) {
      all.clear();
      for (const auto& rank : ranks) {
        rank->batch(step, mine);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      // Labels are in blocks: index i is of the class whose block holds it.
      std::vector<std::int64_t> histogram(counts.size(), 0);
      for (std::int64_t index : all) {
        std::size_t label = 0;
        for (std::int64_t end = counts[0]; index >= end; end += counts[++label]) {
        }
        ++histogram[label];
      }
      CAPTURE(step, histogram);
      REQUIRE(static_cast<std::int64_t>(all.size()) == global);
      for (std::size_t label = 0; label < counts.size(); ++label) {
        CAPTURE(label);
        if (counts[label] == 0) {
          REQUIRE(histogram[label] == 0);
        } else {
          REQUIRE(histogram[label] * classes_with_samples > global - classes_with_samples);
          REQUIRE(histogram[label] * classes_with_samples < global + classes_with_samples);
        }
      }
    }
    ++configurations;
  }
  REQUIRE(configurations == 250);
}
