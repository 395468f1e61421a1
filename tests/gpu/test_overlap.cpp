// Copy/compute overlap, measured with the backend's CUDA events: with stage(batch k+1) before
// forward_backward(batch k), the copy of batch k+1 runs while step k computes; every step starts after
// its own batch's copy has ended (the compute stream waits on the copy's event).
#include <catch2/catch.hpp>
#include <map>

#include "gpu_test_support.hpp"
#include "strider/device/cuda_backend.hpp"

using namespace strider;
using namespace strider::gpu_testing;

TEST_CASE("the copy of batch k+1 overlaps step k", "[overlap]") {
  // Batches of 16 MiB (4096 x 1024 float32) and an mlp with 1024 hidden units: each step computes for
  // much longer than one copy takes, so the staged copy should fall entirely inside the step.
  constexpr std::int64_t count = 4096;
  constexpr std::int64_t features = 1024;
  constexpr int ring = 3;
  constexpr int steps = 12;
  std::vector<PinnedBatch> batches;
  for (int b = 0; b < ring; ++b)
    batches.push_back(make_feature_batch(count, features, ElementType::float32, 10, 40 + b));

  const auto cuda = make_cuda_backend(world(), true);
  ModelConfig config;
  config.kind = "mlp";
  config.features = features;
  config.hidden = 1024;
  config.num_classes = 10;
  cuda->initialize(config);

  // Warm-up (allocations, first launches), then the measured loop, the way a trainer runs it.
  cuda->forward_backward(batches[0].input);
  cuda->apply_sgd(0.01f, 0.9f);
  reset_cuda_backend_stats(*cuda);
  cuda->stage(batches[0].input);
  for (int k = 0; k < steps; ++k) {
    cuda->stage(batches[static_cast<std::size_t>((k + 1) % ring)].input);
    cuda->forward_backward(batches[static_cast<std::size_t>(k % ring)].input);
    cuda->scale_gradients(count);
    cuda->apply_sgd(0.01f, 0.9f);
  }
  const CudaBackendStats stats = cuda_backend_stats(*cuda);
  CHECK(stats.steps == steps);
  CHECK(stats.staged_hits == steps);  // every step found its batch already on the device

  std::map<std::int64_t, TimedInterval> copies;
  for (const TimedInterval& copy : stats.copy_intervals) copies[copy.batch] = copy;
  REQUIRE(stats.compute_intervals.size() == static_cast<std::size_t>(steps));
  int overlapped = 0;
  for (std::size_t k = 0; k < stats.compute_intervals.size(); ++k) {
    const TimedInterval& step = stats.compute_intervals[k];
    REQUIRE(copies.count(step.batch) == 1);
    const TimedInterval& own_copy = copies[step.batch];
    INFO("step " << k << ": copy [" << own_copy.start_ms << ", " << own_copy.end_ms << "] ms, compute ["
                 << step.start_ms << ", " << step.end_ms << "] ms");
    CHECK(step.start_ms >= own_copy.end_ms - 1e-3);  // never computes on a batch still in flight
    if (copies.count(step.batch + 1) == 1) {
      const TimedInterval& next_copy = copies[step.batch + 1];
      const double copy_ms = next_copy.end_ms - next_copy.start_ms;
      const double shared_ms = overlap_ms(next_copy, step);
      UNSCOPED_INFO("step " << k << ": next copy " << copy_ms << " ms, of which " << shared_ms
                            << " ms during the step");
      if (copy_ms > 0 && shared_ms >= 0.5 * copy_ms) ++overlapped;
    }
  }
  INFO("H2D " << static_cast<double>(stats.h2d_bytes) / (stats.h2d_ms * 1e6) << " GB/s, kernel " << stats.kernel_ms
              << " ms");
  // The last step's next copy is never consumed; of the others, nearly all must overlap.
  CHECK(overlapped >= steps - 3);
}
