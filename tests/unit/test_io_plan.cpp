// The pure parts of the I/O layer: element types, the batch plan (sort, deduplicate, coalesce),
// the copy pool, and strider-gen's class counts.
#include <atomic>
#include <catch2/catch.hpp>
#include <numeric>

#include "io/reader_detail.hpp"
#include "strider/io/synthetic_dataset.hpp"

using namespace strider;

TEST_CASE("element types have their sizes and names", "[io]") {
  REQUIRE(element_bytes(ElementType::uint8) == 1);
  REQUIRE(element_bytes(ElementType::int16) == 2);
  REQUIRE(element_bytes(ElementType::float32) == 4);
  REQUIRE(element_bytes(ElementType::uint64) == 8);
  REQUIRE(std::string(element_name(ElementType::float64)) == "float64");
  REQUIRE(std::string(element_name(ElementType::int8)) == "int8");
}

TEST_CASE("a batch plan sorts, deduplicates and coalesces rows into runs", "[io]") {
  io_detail::BatchPlan plan;
  const std::vector<std::int64_t> batch = {9, 3, 4, 9, 10, 0, 5, 3};
  plan.build(batch.data(), static_cast<std::int64_t>(batch.size()));
  REQUIRE(plan.unique_rows == std::vector<std::int64_t>{0, 3, 4, 5, 9, 10});
  REQUIRE(plan.slot_of_position == std::vector<std::int64_t>{4, 1, 2, 4, 5, 0, 3, 1});
  REQUIRE(plan.runs.size() == 3);
  REQUIRE((plan.runs[0].first_slot == 0 && plan.runs[0].slots == 1));  // 0
  REQUIRE((plan.runs[1].first_slot == 1 && plan.runs[1].slots == 3));  // 3 4 5
  REQUIRE((plan.runs[2].first_slot == 4 && plan.runs[2].slots == 2));  // 9 10
  plan.build(nullptr, 0);
  REQUIRE(plan.unique_rows.empty());
  REQUIRE(plan.runs.empty());
}

TEST_CASE("the copy pool runs every part once and passes exceptions on", "[io]") {
  io_detail::CopyPool pool(4);
  REQUIRE(pool.threads() == 4);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(7);
    pool.run(7, [&](int part) { ++hits[part]; });
    for (const auto& hit : hits) REQUIRE(hit == 1);
  }
  REQUIRE_THROWS_AS(pool.run(5,
                             [](int part) {
                               if (part == 3) STRIDER_THROW(UsageError, "part 3");
                             }),
                    UsageError);
  io_detail::CopyPool single(1);
  int calls = 0;
  single.run(3, [&](int) { ++calls; });
  REQUIRE(calls == 3);
}

TEST_CASE("strider-gen's class counts: blocks, balance and imbalance", "[io][gen]") {
  SyntheticOptions options;
  options.class_counts = {10000, 200, 50};
  REQUIRE(synthetic_class_counts(options) == std::vector<std::int64_t>{10000, 200, 50});
  options.class_counts.clear();
  options.samples = 1003;
  options.classes = 10;
  auto counts = synthetic_class_counts(options);
  REQUIRE(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}) == 1003);
  REQUIRE(*std::max_element(counts.begin(), counts.end()) - *std::min_element(counts.begin(), counts.end()) <= 1);
  options.imbalance = 100;
  counts = synthetic_class_counts(options);
  REQUIRE(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}) == 1003);
  REQUIRE(static_cast<double>(counts.front()) / static_cast<double>(counts.back()) == Approx(100).epsilon(0.1));
  REQUIRE(std::is_sorted(counts.rbegin(), counts.rend()));
  options.imbalance = 0.5;
  REQUIRE_THROWS_AS(synthetic_class_counts(options), UsageError);
  options.imbalance = 1;
  options.classes = 0;
  REQUIRE_THROWS_AS(synthetic_class_counts(options), UsageError);
}
