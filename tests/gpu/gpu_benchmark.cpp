// A short training benchmark of the CUDA backend on synthetic batches in pinned memory (one rank):
// an mlp trained the way a trainer runs it (stage(next), forward_backward, all-reduce, SGD), once with the
// copy of the next batch staged and once without, printing host-to-device GB/s (copy bytes over
// copy-stream time), the pipeline's useful GB/s (bytes over wall time), kernel time / step time, and
// how much of each staged copy ran during the previous step.
//   strider_gpu_benchmark [--steps N] [--batch ROWS] [--features F] [--hidden H]
// Exits 77 with "skipped: no CUDA device (...)" where no GPU works.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "gpu_test_support.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/device/cuda_backend.hpp"
#include "strider/device/gpu_probe.hpp"

using namespace strider;
using namespace strider::gpu_testing;

namespace {

struct Options {
  int steps = 100;
  std::int64_t batch = 8192;
  std::int64_t features = 1024;
  std::int64_t hidden = 512;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const long long value = std::atoll(argv[i + 1]);
    if (value <= 0) STRIDER_THROW(UsageError, key + " needs a positive value, got '" + argv[i + 1] + "'");
    if (key == "--steps")
      options.steps = static_cast<int>(value);
    else if (key == "--batch")
      options.batch = value;
    else if (key == "--features")
      options.features = value;
    else if (key == "--hidden")
      options.hidden = value;
    else
      STRIDER_THROW(UsageError, "unknown option " + key + " (--steps, --batch, --features, --hidden)");
  }
  return options;
}

void run(const Communicator& comm, const Options& options, bool staged) {
  constexpr int ring = 4;
  std::vector<PinnedBatch> batches;
  for (int b = 0; b < ring; ++b) {
    batches.push_back(make_feature_batch(options.batch, options.features, ElementType::float32, 10, 7 + b));
  }
  const auto cuda = make_cuda_backend(comm, true);
  ModelConfig config;
  config.kind = "mlp";
  config.features = options.features;
  config.hidden = options.hidden;
  config.num_classes = 10;
  cuda->initialize(config);
  for (int k = 0; k < 3; ++k) {  // warm-up
    cuda->forward_backward(batches[static_cast<std::size_t>(k % ring)].input);
    cuda->apply_sgd(0.01f, 0.9f);
  }
  reset_cuda_backend_stats(*cuda);
  const auto start = std::chrono::steady_clock::now();
  if (staged) cuda->stage(batches[0].input);
  double loss = 0.0;
  for (int k = 0; k < options.steps; ++k) {
    if (staged) cuda->stage(batches[static_cast<std::size_t>((k + 1) % ring)].input);
    const StepResult result = cuda->forward_backward(batches[static_cast<std::size_t>(k % ring)].input);
    loss = result.loss_sum / static_cast<double>(result.count);
    cuda->all_reduce_gradients(comm, result.count);  // one rank: the mean, as a trainer asks it
    cuda->apply_sgd(0.01f, 0.9f);
  }
  const CudaBackendStats stats = cuda_backend_stats(*cuda);  // synchronizes
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::map<std::int64_t, TimedInterval> copies;
  for (const TimedInterval& copy : stats.copy_intervals) copies[copy.batch] = copy;
  double staged_copy_ms = 0.0;
  double overlapped_ms = 0.0;
  for (const TimedInterval& step : stats.compute_intervals) {
    const auto next = copies.find(step.batch + 1);
    if (next == copies.end()) continue;
    staged_copy_ms += next->second.end_ms - next->second.start_ms;
    overlapped_ms += overlap_ms(next->second, step);
  }
  std::printf("%-9s device %d (%s): %d steps of %lld x %lld float32, mlp hidden %lld, last loss %.4f\n",
              staged ? "staged" : "unstaged", stats.device, stats.device_name.c_str(), options.steps,
              static_cast<long long>(options.batch), static_cast<long long>(options.features),
              static_cast<long long>(options.hidden), loss);
  std::printf(
      "%-9s h2d %.2f GB/s (copy stream), pipeline %.2f GB/s (wall), %.1f steps/s, copies overlapped with the "
      "previous step %.1f%%\n",
      staged ? "staged" : "unstaged", static_cast<double>(stats.h2d_bytes) / (stats.h2d_ms * 1e6),
      static_cast<double>(stats.h2d_bytes) / (wall_ms * 1e6), 1e3 * options.steps / wall_ms,
      staged_copy_ms > 0 ? 100.0 * overlapped_ms / staged_copy_ms : 0.0);
  // Kernel time (the steps' and updates' events) against wall time per step: how busy the GPU is.
  std::printf("%-9s kernel time / step time: %.3f ms / %.3f ms = %.3f (all-reduce %.3f ms per step)\n",
              staged ? "staged" : "unstaged", stats.kernel_ms / options.steps, wall_ms / options.steps,
              stats.kernel_ms / wall_ms, stats.all_reduce_ms / options.steps);
}

}  // namespace

int main(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) {
    const GpuProbe probe = probe_gpus();
    if (probe.device_count == 0) {
      std::printf("skipped: no CUDA device (%s)\n", probe.reason.c_str());
      return STRIDER_GPU_SKIP_CODE;
    }
    const Options options = parse(argc, argv);
    run(world, options, false);
    run(world, options, true);
    return 0;
  });
}
