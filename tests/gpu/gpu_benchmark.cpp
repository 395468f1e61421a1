// A short training benchmark of the CUDA backend on synthetic batches (one rank): an mlp trained the
// way a trainer runs it (stage(next), forward_backward, all-reduce, SGD), once with the copy of the
// next batch staged and once without, from pinned host memory, pageable host memory or both. It
// first measures the host-to-device peak of this machine (back-to-back copies of one batch's bytes
// from pinned and from pageable memory), then prints per run: host-to-device GB/s (copy bytes over
// copy-stream time) and the pipeline's useful GB/s (bytes over wall time), each as a share of the
// pinned peak, kernel time / step time, and how much of each staged copy ran during the previous
// step. A large batch with a small model (--batch 65536 --features 256 --hidden 16) is bound by the
// copies; the default shape by the kernels.
//   strider_gpu_benchmark [--steps N] [--batch ROWS] [--features F] [--hidden H]
//                         [--memory pinned|pageable|both]   (default pinned)
// Exits 77 with "skipped: no CUDA device (...)" where no GPU works.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "device/cuda/cuda_check.hpp"
#include "device/cuda/cuda_handles.hpp"
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
  bool pinned = true;
  bool pageable = false;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string text = argv[i + 1];
    if (key == "--memory") {
      if (text != "pinned" && text != "pageable" && text != "both")
        STRIDER_THROW(UsageError, "--memory takes pinned, pageable or both, got '" + text + "'");
      options.pinned = text != "pageable";
      options.pageable = text != "pinned";
      continue;
    }
    const long long value = std::atoll(text.c_str());
    if (value <= 0) STRIDER_THROW(UsageError, key + " needs a positive value, got '" + text + "'");
    if (key == "--steps")
      options.steps = static_cast<int>(value);
    else if (key == "--batch")
      options.batch = value;
    else if (key == "--features")
      options.features = value;
    else if (key == "--hidden")
      options.hidden = value;
    else
      STRIDER_THROW(UsageError, "unknown option " + key + " (--steps, --batch, --features, --hidden, --memory)");
  }
  if (argc % 2 == 0) STRIDER_THROW(UsageError, std::string("option ") + argv[argc - 1] + " needs a value");
  return options;
}

/// A batch's samples and labels copied into pageable (page-aligned, not pinned) host memory.
struct PageableBatch {
  HostBuffer samples;
  HostBuffer labels;
  BatchInput input;
};

PageableBatch pageable_copy(const PinnedBatch& batch) {
  const std::shared_ptr<HostAllocator> allocator = make_page_aligned_allocator();
  PageableBatch copy;
  copy.samples = HostBuffer(allocator, batch.samples.size());
  copy.labels = HostBuffer(allocator, batch.labels.size());
  std::memcpy(copy.samples.data(), batch.samples.data(), batch.samples.size());
  std::memcpy(copy.labels.data(), batch.labels.data(), batch.labels.size());
  copy.input = batch.input;
  copy.input.samples = copy.samples.data();
  copy.input.labels = reinterpret_cast<const std::int32_t*>(copy.labels.data());
  return copy;
}

/// GB/s of `copies` back-to-back cudaMemcpyAsync of `bytes` from `host` on one stream, over wall time
/// (after one copy of warm-up).
double host_to_device_gb_per_s(const void* host, std::size_t bytes, int copies) {
  const detail::DeviceMemory device = detail::allocate_device(bytes);
  const detail::CudaStream stream = detail::make_stream();
  STRIDER_CUDA_CHECK(cudaMemcpyAsync(device.get(), host, bytes, cudaMemcpyHostToDevice, stream.get()),
                     "copying the warm-up of the peak measurement");
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(stream.get()), "waiting for the warm-up copy");
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < copies; ++k) {
    STRIDER_CUDA_CHECK(cudaMemcpyAsync(device.get(), host, bytes, cudaMemcpyHostToDevice, stream.get()),
                       "copying for the peak measurement");
  }
  STRIDER_CUDA_CHECK(cudaStreamSynchronize(stream.get()), "waiting for the peak measurement's copies");
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(bytes) * copies / (wall_s * 1e9);
}

void run(const Communicator& comm, const Options& options, const std::vector<BatchInput>& batches, const char* memory,
         bool staged, double pinned_peak_gb_per_s) {
  const auto ring = batches.size();
  const auto cuda = make_cuda_backend(comm, true);
  ModelConfig config;
  config.kind = "mlp";
  config.features = options.features;
  config.hidden = options.hidden;
  config.num_classes = 10;
  cuda->initialize(config);
  for (std::size_t k = 0; k < 3; ++k) {  // warm-up
    cuda->forward_backward(batches[k % ring]);
    cuda->apply_sgd(0.01f, 0.9f);
  }
  reset_cuda_backend_stats(*cuda);
  const auto start = std::chrono::steady_clock::now();
  if (staged) cuda->stage(batches[0]);
  double loss = 0.0;
  for (int k = 0; k < options.steps; ++k) {
    if (staged) cuda->stage(batches[static_cast<std::size_t>(k + 1) % ring]);
    const StepResult result = cuda->forward_backward(batches[static_cast<std::size_t>(k) % ring]);
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
  const std::string run_name = std::string(memory) + (staged ? " staged" : " unstaged");
  const double h2d_gb_per_s = static_cast<double>(stats.h2d_bytes) / (stats.h2d_ms * 1e6);
  const double pipeline_gb_per_s = static_cast<double>(stats.h2d_bytes) / (wall_ms * 1e6);
  std::printf("%-17s device %d (%s): %d steps of %lld x %lld float32, mlp hidden %lld, last loss %.4f\n",
              run_name.c_str(), stats.device, stats.device_name.c_str(), options.steps,
              static_cast<long long>(options.batch), static_cast<long long>(options.features),
              static_cast<long long>(options.hidden), loss);
  std::printf(
      "%-17s h2d %.2f GB/s (copy stream, %.0f%% of the pinned peak), pipeline %.2f GB/s (wall, %.0f%% of the pinned "
      "peak), %.1f steps/s, copies overlapped with the previous step %.1f%%\n",
      run_name.c_str(), h2d_gb_per_s, 100.0 * h2d_gb_per_s / pinned_peak_gb_per_s, pipeline_gb_per_s,
      100.0 * pipeline_gb_per_s / pinned_peak_gb_per_s, 1e3 * options.steps / wall_ms,
      staged_copy_ms > 0 ? 100.0 * overlapped_ms / staged_copy_ms : 0.0);
  // Kernel time (the steps' and updates' events) against wall time per step: how busy the GPU is.
  std::printf("%-17s kernel time / step time: %.3f ms / %.3f ms = %.3f (all-reduce %.3f ms per step)\n",
              run_name.c_str(), stats.kernel_ms / options.steps, wall_ms / options.steps, stats.kernel_ms / wall_ms,
              stats.all_reduce_ms / options.steps);
}

}  // namespace

int main(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) {
    const Options options = parse(argc, argv);  // a usage error shows on machines without a GPU too
    const GpuProbe probe = probe_gpus();
    if (probe.device_count == 0) {
      std::printf("skipped: no CUDA device (%s)\n", probe.reason.c_str());
      return STRIDER_GPU_SKIP_CODE;
    }
    constexpr int ring = 4;
    std::vector<PinnedBatch> pinned;
    std::vector<PageableBatch> pageable;
    std::vector<BatchInput> pinned_inputs, pageable_inputs;
    for (int b = 0; b < ring; ++b) {
      pinned.push_back(make_feature_batch(options.batch, options.features, ElementType::float32, 10, 7 + b));
      pinned_inputs.push_back(pinned.back().input);
      if (options.pageable) {
        pageable.push_back(pageable_copy(pinned.back()));
        pageable_inputs.push_back(pageable.back().input);
      }
    }
    // The peak: back-to-back copies of one batch's samples, about 2 GiB in all (8 to 1024 copies).
    const std::size_t bytes = pinned.front().samples.size();
    const int copies = static_cast<int>(std::clamp<std::size_t>((std::size_t{2} << 30) / bytes, 8, 1024));
    const double pinned_peak = host_to_device_gb_per_s(pinned.front().samples.data(), bytes, copies);
    const PageableBatch peak_source = pageable_copy(pinned.front());
    const double pageable_peak = host_to_device_gb_per_s(peak_source.samples.data(), bytes, copies);
    std::printf("h2d peak: pinned %.2f GB/s, pageable %.2f GB/s (%d back-to-back copies of %.1f MiB, wall time)\n",
                pinned_peak, pageable_peak, copies, static_cast<double>(bytes) / (1 << 20));
    if (options.pinned) {
      run(world, options, pinned_inputs, "pinned", false, pinned_peak);
      run(world, options, pinned_inputs, "pinned", true, pinned_peak);
    }
    if (options.pageable) {
      run(world, options, pageable_inputs, "pageable", false, pinned_peak);
      run(world, options, pageable_inputs, "pageable", true, pinned_peak);
    }
    return 0;
  });
}
