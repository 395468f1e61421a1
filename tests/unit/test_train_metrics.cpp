// ClassCounts: confusion counts, per-class recall, accuracy, refusal of out-of-range classes; recall
// from per-class counts.
#include <catch2/catch.hpp>
#include <cmath>

#include "strider/core/error.hpp"
#include "strider/train/metrics.hpp"

using namespace strider;

TEST_CASE("class counts give per-class recall and accuracy", "[train][metrics]") {
  ClassCounts counts(3);
  REQUIRE(counts.total() == 0);
  REQUIRE(std::isnan(counts.accuracy()));
  // Class 0: 4 samples, 3 right. Class 1: 2 samples, 0 right. Class 2: none.
  const std::vector<std::int32_t> labels = {0, 0, 0, 0, 1, 1};
  const std::vector<std::int32_t> predictions = {0, 0, 2, 0, 0, 2};
  counts.add(labels.data(), predictions.data(), 4);
  counts.add(labels.data() + 4, predictions.data() + 4, 2);
  REQUIRE(counts.total() == 6);
  REQUIRE(counts.count(0, 0) == 3);
  REQUIRE(counts.count(0, 2) == 1);
  REQUIRE(counts.count(1, 2) == 1);
  REQUIRE(counts.support(0) == 4);
  REQUIRE(counts.support(2) == 0);
  const std::vector<double> recall = counts.recall();
  REQUIRE(recall.size() == 3);
  REQUIRE(recall[0] == 0.75);
  REQUIRE(recall[1] == 0.0);
  REQUIRE(std::isnan(recall[2]));  // no samples: undefined, written as null in JSON
  REQUIRE(counts.accuracy() == 0.5);

  const std::vector<std::int32_t> bad_labels = {0, 3};
  try {
    counts.add(bad_labels.data(), predictions.data(), 2);
    FAIL("no error");
  } catch (const DataError& error) {
    REQUIRE(error.reason() == "label 3 at row 1 is outside 0..2");
  }
  const std::vector<std::int32_t> bad_predictions = {-1};
  REQUIRE_THROWS_AS(counts.add(labels.data(), bad_predictions.data(), 1), DataError);
  REQUIRE(counts.total() == 6);  // refused batches count nothing
  counts.clear();
  REQUIRE(counts.total() == 0);
  REQUIRE_THROWS_AS(ClassCounts(0), UsageError);
}

TEST_CASE("per-class recall from per-class counts: NaN without samples", "[train][metrics]") {
  const std::vector<double> recall = per_class_recall({3, 0, 0}, {4, 2, 0});
  REQUIRE(recall.size() == 3);
  REQUIRE(recall[0] == 0.75);
  REQUIRE(recall[1] == 0.0);
  REQUIRE(std::isnan(recall[2]));
  REQUIRE(per_class_recall({}, {}).empty());
  REQUIRE_THROWS_AS(per_class_recall({1}, {1, 2}), UsageError);
}
