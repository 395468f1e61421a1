// The MLPerf-Storage workload presets (DLIO's H100 configurations) and the accelerator utilization
// (AU) arithmetic on a fixed trace. Every expected value is written out here, worked by hand.
#include <catch2/catch.hpp>

#include "strider/core/error.hpp"
#include "strider/pipeline/accelerator_utilization.hpp"
#include "strider/pipeline/workload_preset.hpp"

using namespace strider;

TEST_CASE("workload presets: DLIO's H100 shapes, samples rounded up to whole 4 KiB blocks", "[storage]") {
  struct Expected {
    const char* name;
    std::int64_t dlio_bytes, sample_bytes, batch;
    double compute_s, threshold;
  };
  // 146,600,628 = 35,791 x 4096 + 708 -> 35,792 blocks; 114,660 = 27 x 4096 + 4,068 -> 28 blocks;
  // 2,828,486 = 690 x 4096 + 2,246 -> 691 blocks.
  const Expected expected[] = {
      {"unet3d", 146600628, 35792LL * 4096, 7, 0.323, 0.90},
      {"resnet50", 114660, 28LL * 4096, 400, 0.224, 0.90},
      {"cosmoflow", 2828486, 691LL * 4096, 1, 0.0035, 0.70},
  };
  REQUIRE(workload_presets().size() == 3);
  for (const Expected& e : expected) {
    INFO(e.name);
    const WorkloadPreset& preset = workload_preset(e.name);
    CHECK(preset.name == e.name);
    CHECK(preset.dlio_sample_bytes == e.dlio_bytes);
    CHECK(preset.sample_bytes == e.sample_bytes);
    CHECK(preset.batch_size == e.batch);
    CHECK(preset.compute_seconds == e.compute_s);
    CHECK(preset.au_threshold == e.threshold);
    CHECK(preset.batch_bytes() == e.sample_bytes * e.batch);
  }
  // unet3d batches are about 1 GB: 7 x 146,604,032 bytes.
  CHECK(workload_preset("unet3d").batch_bytes() == 1026228224);
  CHECK(workload_preset_names() == "unet3d|resnet50|cosmoflow");
  try {
    workload_preset("bert");
    FAIL("an unknown workload was accepted");
  } catch (const UsageError& error) {
    CHECK(error.reason() == "unknown workload 'bert' (unet3d, resnet50, cosmoflow)");
  }
}

TEST_CASE("accelerator utilization: each epoch's first step left out, epochs averaged", "[storage]") {
  // Epoch 0: step 0 waits 1 s and computes 1 s (left out); step 1 waits 0.5 s and computes 1 s;
  // step 2 computes 1 s at once. Counted: 2 s of compute in 4.5 - 2.0 = 2.5 s: AU 0.8; 7 + 7
  // samples (700 + 700 bytes) in 2.5 s: 5.6 samples/s, 560 bytes/s.
  // Epoch 1: step 0 is left out; step 1 computes 0.5 s at once and step 2 after a wait of 1.5 s:
  // 1 s of compute in 10.5 - 8.0 = 2.5 s: AU 0.4; 3 + 5 samples (300 + 500 bytes): 3.2 samples/s,
  // 320 bytes/s. The rank: AU (0.8 + 0.4) / 2 = 0.6, (5.6 + 3.2) / 2 = 4.4 samples/s, 440 bytes/s.
  const std::vector<StepTiming> trace = {
      {0, 0.0, 1.0, 2.0, 7, 700}, {0, 2.0, 2.5, 3.5, 7, 700}, {0, 3.5, 3.5, 4.5, 7, 700},
      {1, 5.0, 7.0, 8.0, 9, 900}, {1, 8.0, 8.0, 8.5, 3, 300}, {1, 8.5, 10.0, 10.5, 5, 500},
  };
  const RankUtilization rank = accelerator_utilization(trace);
  CHECK(rank.au == Approx(0.6).margin(1e-12));
  CHECK(rank.samples_per_s == Approx(4.4).margin(1e-12));
  CHECK(rank.bytes_per_s == Approx(440.0).margin(1e-9));
  CHECK(rank.counted_steps == 4);
  // The first epoch alone, and the second alone.
  CHECK(accelerator_utilization({trace.begin(), trace.begin() + 3}).au == Approx(0.8).margin(1e-12));
  CHECK(accelerator_utilization({trace.begin() + 3, trace.end()}).au == Approx(0.4).margin(1e-12));
  CHECK(accelerator_utilization({trace.begin() + 3, trace.end()}).samples_per_s == Approx(3.2).margin(1e-12));
  // A long first step (the pipeline's start) does not count: only its end matters.
  std::vector<StepTiming> slow_start = trace;
  slow_start[0].compute_start_s = 1.9;
  slow_start[0].requested_s = -100.0;
  CHECK(accelerator_utilization(slow_start).au == Approx(0.6).margin(1e-12));
  // An epoch of one step has nothing to count and is not averaged in; no epoch with two steps: 0.
  std::vector<StepTiming> with_single = trace;
  with_single.push_back({2, 11.0, 12.0, 13.0, 7, 700});
  CHECK(accelerator_utilization(with_single).au == Approx(0.6).margin(1e-12));
  CHECK(accelerator_utilization(with_single).counted_steps == 4);
  const RankUtilization none = accelerator_utilization({{0, 0.0, 1.0, 2.0, 1, 1}, {1, 2.0, 3.0, 4.0, 1, 1}});
  CHECK(none.au == 0.0);
  CHECK(none.samples_per_s == 0.0);
  CHECK(none.counted_steps == 0);
  CHECK(accelerator_utilization({}).au == 0.0);
  // Back-to-back compute with no wait is fully utilized.
  CHECK(accelerator_utilization({{0, 0, 0, 1, 1, 1}, {0, 1, 1, 2, 1, 1}, {0, 2, 2, 3, 1, 1}}).au ==
        Approx(1.0).margin(1e-12));
}

TEST_CASE("accelerator utilization of a job: mean over ranks against the threshold, the lowest, summed rates",
          "[storage]") {
  const std::vector<RankUtilization> ranks = {{0.75, 10.0, 1000.0, 3}, {1.0, 20.0, 2000.0, 3}, {0.5, 5.0, 500.0, 3}};
  const UtilizationSummary summary = summarize_utilization(ranks, 0.75);
  CHECK(summary.au == 0.75);
  CHECK(summary.au_min == 0.5);
  CHECK(summary.au_threshold == 0.75);
  CHECK(summary.passed);  // at the threshold passes
  CHECK(summary.samples_per_s == 35.0);
  CHECK(summary.bytes_per_s == 3500.0);
  CHECK_FALSE(summarize_utilization(ranks, 0.76).passed);
  const UtilizationSummary none = summarize_utilization({}, 0.9);
  CHECK(none.au == 0.0);
  CHECK(none.au_min == 0.0);
  CHECK_FALSE(none.passed);
}
