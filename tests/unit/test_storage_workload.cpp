// The MLPerf-Storage workload presets (DLIO's H100 configurations) and the accelerator utilization
// (AU) arithmetic on a fixed trace. Every expected value is written out here, worked by hand.
#include <catch2/catch.hpp>

#include "strider/bench/accelerator_utilization.hpp"
#include "strider/bench/workload_preset.hpp"
#include "strider/core/error.hpp"

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
    CHECK(error.reason() == "unknown workload 'bert' (known: unet3d, resnet50, cosmoflow)");
  }
  try {
    workload_preset("resnet");
    FAIL("a mistyped workload was accepted");
  } catch (const UsageError& error) {
    CHECK(error.reason() == "unknown workload 'resnet'; did you mean 'resnet50'? (known: unet3d, resnet50, cosmoflow)");
  }
}

TEST_CASE("accelerator utilization: each epoch's first step left out, epochs averaged", "[storage]") {
  // Epoch 0: step 0 waits 1 s and computes 1 s (left out); step 1 waits 0.5 s and computes 1 s;
  // step 2 computes 1 s at once. The window is 2.0 .. 4.5 s with 2 s of compute: AU 0.8, and 7 + 7
  // samples (700 + 700 bytes). Epoch 1: step 0 is left out; step 1 computes 0.5 s at once and step 2
  // after a wait of 1.5 s: 8.0 .. 10.5 s with 1 s of compute: AU 0.4, 3 + 5 samples (300 + 500
  // bytes). The rank: AU (0.8 + 0.4) / 2 = 0.6.
  const std::vector<StepTiming> trace = {
      {0, 0.0, 1.0, 2.0, 7, 700}, {0, 2.0, 2.5, 3.5, 7, 700}, {0, 3.5, 3.5, 4.5, 7, 700},
      {1, 5.0, 7.0, 8.0, 9, 900}, {1, 8.0, 8.0, 8.5, 3, 300}, {1, 8.5, 10.0, 10.5, 5, 500},
  };
  const std::vector<EpochWindow> windows = epoch_windows(trace);
  REQUIRE(windows.size() == 2);
  CHECK(windows[0].epoch == 0);
  CHECK(windows[0].start_s == 2.0);
  CHECK(windows[0].end_s == 4.5);
  CHECK(windows[0].computing_s == Approx(2.0).margin(1e-12));
  CHECK(windows[0].samples == 14);
  CHECK(windows[0].bytes == 1400);
  CHECK(windows[0].steps == 2);
  CHECK(windows[1].epoch == 1);
  CHECK(windows[1].start_s == 8.0);
  CHECK(windows[1].end_s == 10.5);
  CHECK(windows[1].computing_s == Approx(1.0).margin(1e-12));
  CHECK(windows[1].samples == 8);
  CHECK(windows[1].bytes == 800);
  CHECK(accelerator_utilization(windows) == Approx(0.6).margin(1e-12));
  CHECK(accelerator_utilization({windows[0]}) == Approx(0.8).margin(1e-12));
  CHECK(accelerator_utilization({windows[1]}) == Approx(0.4).margin(1e-12));
  // A long first step (the pipeline's start) does not count: only its end matters.
  std::vector<StepTiming> slow_start = trace;
  slow_start[0].compute_start_s = 1.9;
  slow_start[0].requested_s = -100.0;
  CHECK(accelerator_utilization(epoch_windows(slow_start)) == Approx(0.6).margin(1e-12));
  // An epoch of one step has no window; no window at all: AU 0.
  std::vector<StepTiming> with_single = trace;
  with_single.push_back({2, 11.0, 12.0, 13.0, 7, 700});
  CHECK(epoch_windows(with_single).size() == 2);
  CHECK(epoch_windows({{0, 0.0, 1.0, 2.0, 1, 1}, {1, 2.0, 3.0, 4.0, 1, 1}}).empty());
  CHECK(accelerator_utilization(std::vector<EpochWindow>{}) == 0.0);
  // Back-to-back compute with no wait is fully utilized.
  CHECK(accelerator_utilization(epoch_windows({{0, 0, 0, 1, 1, 1}, {0, 1, 1, 2, 1, 1}, {0, 2, 2, 3, 1, 1}})) ==
        Approx(1.0).margin(1e-12));
}

TEST_CASE("accelerator utilization of a job: mean and lowest rank's AU, the ranks' rates summed per epoch",
          "[storage]") {
  // Rank 0: the windows of the trace above (AU 0.6). Rank 1: epoch 0 from 2.5 to 5.0 s computing
  // 2.5 s (AU 1), 10 samples of 100 bytes; epoch 1 from 8.0 to 9.0 s computing 0.5 s (AU 0.5), 6
  // samples: AU 0.75. The job: AU (0.6 + 0.75) / 2 = 0.675, lowest 0.6. Epoch 0: 14 / 2.5 + 10 / 2.5
  // = 9.6 samples/s (1400 / 2.5 + 1000 / 2.5 = 960 bytes/s); epoch 1: 8 / 2.5 + 6 / 1 = 9.2 samples/s
  // (320 + 600 = 920 bytes/s). Mean over epochs: 9.4 samples/s, 940 bytes/s.
  const std::vector<EpochWindow> rank0 = {{0, 2.0, 4.5, 2.0, 14, 1400, 2}, {1, 8.0, 10.5, 1.0, 8, 800, 2}};
  const std::vector<EpochWindow> rank1 = {{0, 2.5, 5.0, 2.5, 10, 1000, 2}, {1, 8.0, 9.0, 0.5, 6, 600, 2}};
  const UtilizationSummary summary = summarize_utilization({rank0, rank1}, 0.67);
  CHECK(summary.au == Approx(0.675).margin(1e-12));
  CHECK(summary.au_min == Approx(0.6).margin(1e-12));
  CHECK(summary.au_threshold == 0.67);
  CHECK(summary.passed);
  CHECK(summary.samples_per_s == Approx(9.4).margin(1e-12));
  CHECK(summary.bytes_per_s == Approx(940.0).margin(1e-9));
  CHECK_FALSE(summarize_utilization({rank0, rank1}, 0.68).passed);
  // At the threshold passes: AU 0.5 and 0.75 (exact in binary), mean 0.625.
  const std::vector<EpochWindow> half = {{0, 0.0, 2.0, 1.0, 1, 1, 1}};
  const std::vector<EpochWindow> three_quarters = {{0, 0.0, 4.0, 3.0, 1, 1, 1}};
  CHECK(summarize_utilization({half, three_quarters}, 0.625).passed);
  const UtilizationSummary none = summarize_utilization({}, 0.9);
  CHECK(none.au == 0.0);
  CHECK(none.au_min == 0.0);
  CHECK(none.samples_per_s == 0.0);
  CHECK_FALSE(none.passed);
}
