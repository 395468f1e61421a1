// The lines strider-train prints (train/report.hpp): their words and number formats are what users
// and scripts read (tests/integration/test_train.sh greps "epoch 3/3: loss"), so they are pinned here
// character by character, with the expected text written out by hand. The stats JSON's per-epoch
// per-class recall is checked in its written form.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "strider/train/summary.hpp"
#include "train/report.hpp"

using namespace strider;

namespace {

EpochSummary some_epoch() {
  EpochSummary epoch;
  epoch.epoch = 1;  // printed as the second epoch
  epoch.loss = 0.123456;
  epoch.accuracy = 0.95678;
  epoch.samples_per_s = 81234.4;
  epoch.stall_fraction = 0.01234;
  epoch.steps = 40;
  epoch.seconds = 0.5249;
  epoch.padding_efficiency = 0.87654;
  return epoch;
}

}  // namespace

TEST_CASE("report: the epoch line", "[train][report]") {
  REQUIRE(detail::epoch_line(some_epoch(), 5, false, false) ==
          "epoch 2/5: loss 0.1235 accuracy 0.957 samples/s 81234 stall 1.2% (40 steps, 0.52 s)");
  // Stopped by a signal, and a sequence dataset (padding efficiency at the end).
  REQUIRE(detail::epoch_line(some_epoch(), 5, true, true) ==
          "epoch 2/5 (stopped): loss 0.1235 accuracy 0.957 samples/s 81234 stall 1.2% (40 steps, 0.52 s) "
          "padding efficiency 0.877");
}

TEST_CASE("report: evaluation, recall and class weight lines", "[train][report]") {
  const std::vector<double> recall = {0.99, 0.5, 1.0 / 3.0};
  REQUIRE(detail::evaluation_line("eval.h5", 0.875, 4000, 0.126, recall) ==
          "evaluation on eval.h5: accuracy 0.875 over 4000 samples (0.13 s); per-class recall 0:0.990 1:0.500 2:0.333");
  REQUIRE(detail::final_recall_line(recall) == "per-class recall: 0:0.990 1:0.500 2:0.333");
  // A class without evaluation samples has no recall (NaN).
  REQUIRE(detail::final_recall_line({std::nan("")}) == "per-class recall: 0:nan");
  // Weights with every digit needed to read them back (they are the next epoch's sampling weights).
  REQUIRE(detail::class_weights_line({0.5, 1.0 / 3.0, 2}) == "class weights now 0.5,0.33333333333333331,2");
  REQUIRE(detail::stopped_line() == "stopped by a signal; checkpoint written, exiting with status 75 to be requeued");
}

TEST_CASE("report: the stats JSON holds each epoch's per-class recall, null for a class without samples",
          "[train][report]") {
  TrainSummary summary;
  summary.epochs = {some_epoch(), some_epoch()};
  summary.epochs[0].per_class_recall = {0.5, std::nan(""), 1.0};
  summary.per_class_recall = {0.25, 0.75};
  const std::string path = "/tmp/strider_report_" + std::to_string(getpid()) + ".json";
  write_train_stats_json(path, summary);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::remove(path.c_str());
  const std::string json = text.str();
  // The epoch's keys stay as they were; the recall comes after them, within the epoch.
  REQUIRE(json.find("\"padding_efficiency\":0.87654,\"per_class_recall\":[0.5,null,1]}") != std::string::npos);
  // An epoch without classes has no key; the evaluation's recall stays at the top level.
  REQUIRE(json.find("\"padding_efficiency\":0.87654}") != std::string::npos);
  REQUIRE(json.find("\"per_class_recall\":[0.25,0.75],\"eval_accuracy\"") != std::string::npos);
}
