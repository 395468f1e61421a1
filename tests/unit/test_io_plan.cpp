// The pure parts of the I/O layer: element types, the batch plan (sort, deduplicate, coalesce),
// the copy pool, and strider-gen's class counts.
#include <algorithm>
#include <array>
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

namespace {

/// Shard layouts of these row counts, back to back.
std::vector<io_detail::ShardLayout> shards_of(const std::vector<std::int64_t>& rows) {
  std::vector<io_detail::ShardLayout> shards;
  std::int64_t first = 0;
  for (std::int64_t count : rows) {
    io_detail::ShardLayout shard;
    shard.first_row = first;
    shard.rows = count;
    shards.push_back(shard);
    first += count;
  }
  return shards;
}

}  // namespace

TEST_CASE("a batch plan sorts, deduplicates and coalesces rows into runs", "[io]") {
  io_detail::BatchPlan plan;
  const std::vector<std::int64_t> batch = {9, 3, 4, 9, 10, 0, 5, 3};
  const io_detail::ShardIndex one_file(shards_of({11}));
  plan.build(batch.data(), static_cast<std::int64_t>(batch.size()), one_file);
  REQUIRE(plan.unique_rows == std::vector<std::int64_t>{0, 3, 4, 5, 9, 10});
  REQUIRE(plan.slot_of_position == std::vector<std::int64_t>{4, 1, 2, 4, 5, 0, 3, 1});
  REQUIRE(plan.runs.size() == 3);
  REQUIRE((plan.runs[0].first_slot == 0 && plan.runs[0].slots == 1));  // 0
  REQUIRE((plan.runs[1].first_slot == 1 && plan.runs[1].slots == 3));  // 3 4 5
  REQUIRE((plan.runs[2].first_slot == 4 && plan.runs[2].slots == 2));  // 9 10
  plan.build(nullptr, 0, one_file);
  REQUIRE(plan.unique_rows.empty());
  REQUIRE(plan.runs.empty());
  // Shards [0, 4) [4, 5) [5, 10) [10, 11): a run never crosses into the next file.
  const io_detail::ShardIndex four_files(shards_of({4, 1, 5, 1}));
  plan.build(batch.data(), static_cast<std::int64_t>(batch.size()), four_files);
  const std::vector<std::array<std::int64_t, 3>> runs = {{0, 1, 0}, {1, 1, 0}, {2, 1, 1},
                                                         {3, 1, 2}, {4, 1, 2}, {5, 1, 3}};
  REQUIRE(plan.runs.size() == runs.size());  // 0 | 3 | 4 | 5 | 9 | 10: 3-4-5 and 9-10 are split
  for (std::size_t r = 0; r < runs.size(); ++r) {
    CAPTURE(r);
    REQUIRE(plan.runs[r].first_slot == runs[r][0]);
    REQUIRE(plan.runs[r].slots == runs[r][1]);
    REQUIRE(plan.runs[r].shard == static_cast<std::size_t>(runs[r][2]));
  }
  // Rows 1, 2, 3 in [0, 4): one run; 3 and 4 are in different files.
  const std::vector<std::int64_t> adjacent = {2, 4, 1, 3};
  plan.build(adjacent.data(), 4, four_files);
  REQUIRE(plan.runs.size() == 2);
  REQUIRE((plan.runs[0].slots == 3 && plan.runs[0].shard == 0 && plan.runs[1].shard == 1));
}

TEST_CASE("a batch plan of rows already in file order is the rows themselves; any other is sorted", "[io]") {
  const io_detail::ShardIndex files(shards_of({4, 1, 5, 10}));
  const std::vector<std::vector<std::int64_t>> batches = {
      {0, 1, 2, 5, 6, 9, 19}, {7}, {0, 1, 2, 3, 4, 5}, {1, 2, 3, 3}, {1, 2, 3, 2}, {4, 4}, {3, 2, 1}, {0, 19, 18}};
  for (const auto& batch : batches) {
    CAPTURE(batch);
    // What the plan must be: the distinct rows sorted, each position's slot among them.
    std::vector<std::int64_t> unique_rows = batch;
    std::sort(unique_rows.begin(), unique_rows.end());
    unique_rows.erase(std::unique(unique_rows.begin(), unique_rows.end()), unique_rows.end());
    std::vector<std::int64_t> slots;
    for (std::int64_t row : batch)
      slots.push_back(std::find(unique_rows.begin(), unique_rows.end(), row) - unique_rows.begin());
    io_detail::BatchPlan plan;
    plan.build(batch.data(), static_cast<std::int64_t>(batch.size()), files);
    REQUIRE(plan.unique_rows == unique_rows);
    REQUIRE(plan.slot_of_position == slots);
    REQUIRE(plan.in_file_order() == (std::is_sorted(batch.begin(), batch.end()) && unique_rows.size() == batch.size()));
    std::int64_t covered = 0;
    for (const auto& run : plan.runs) covered += run.slots;
    REQUIRE(covered == static_cast<std::int64_t>(unique_rows.size()));
  }
}

TEST_CASE("the shard of a row, against a scan of the shards' row ranges", "[io]") {
  const std::vector<std::vector<std::int64_t>> layouts = {
      {1}, {1000}, {3, 1, 1, 7, 2}, {125000, 125000, 125000, 125000}, {1, 999999, 1}, {4096, 4095, 4097, 1}};
  for (const auto& rows : layouts) {
    const auto shards = shards_of(rows);
    const io_detail::ShardIndex index(shards);
    const std::int64_t total = shards.back().first_row + shards.back().rows;
    std::int64_t wrong = 0;
    std::size_t expected = 0;
    for (std::int64_t row = 0; row < total; ++row) {
      while (row >= shards[expected].first_row + shards[expected].rows) ++expected;
      wrong += index.shard_of(row) == expected ? 0 : 1;
    }
    CAPTURE(rows.size(), total);
    REQUIRE(wrong == 0);
  }
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
