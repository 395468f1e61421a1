// strider-epoch-plan-bench: what the per-epoch plan of the torch-exact shuffle costs. For each N it
// times DistributedSampler::set_epoch (torch.randperm(N): MT19937 and Fisher-Yates into the
// sampler's own 8N-byte order, as one rank without a node-shared order pays it every epoch) on one
// thread, and prints one JSON object:
//
//   {"runs": [{"n": N, "order_bytes": ..., "first_epoch_ms": ..., "epoch_ms": ..., "epoch_ms_min": ...,
//              "epoch_cpu_ms": ..., "ns_per_sample": ..., "repeats": R}, ...]}
//
// first_epoch_ms is epoch 0, which also touches the order's pages for the first time; epoch_ms (the
// median), epoch_ms_min and epoch_cpu_ms (the median of the thread's CPU time) are over the epochs
// 1..R after it, ns_per_sample is epoch_ms per sample. With a node-shared order (the Loader's
// default) one rank per node pays this and the others copy their positions.
//
//   strider-epoch-plan-bench [--sizes N[,N...]] [--repeats R]
//
// N may be written 1e6, 1000000 or 1M/1G (powers of ten). bench/scripts/epoch_plan.py runs it and
// writes bench/results/epoch_plan.json with the machine it ran on.

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "strider/sampling/distributed_sampler.hpp"

namespace {

constexpr const char* kUsage =
    "usage: strider-epoch-plan-bench [--sizes N[,N...]] [--repeats R]\n"
    "  --sizes    dataset sizes to plan (default 1e6,1e7; 1e6, 1000000 and 1M are the same)\n"
    "  --repeats  epochs timed after the first, per size (default 5)\n"
    "Prints one JSON object with each size's set_epoch time (see bench/epoch-plan/main.cpp).\n";

[[noreturn]] void usage_error(const std::string& problem) {
  std::fprintf(stderr, "strider: error: %s (see --help)\n", problem.c_str());
  std::exit(2);
}

// "1e6", "1000000", "1M", "2G": a positive integer count of samples.
std::int64_t parse_size(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  double scale = 1;
  if (end != nullptr && *end != '\0') {
    const std::string suffix(end);
    if (suffix == "K" || suffix == "k") {
      scale = 1e3;
    } else if (suffix == "M") {
      scale = 1e6;
    } else if (suffix == "G") {
      scale = 1e9;
    } else {
      usage_error("--sizes: '" + text + "' is not a count (write 1e6, 1000000 or 1M)");
    }
  }
  const double count = value * scale;
  if (end == text.c_str() || !(count >= 1) || count > 4e18 ||
      count != static_cast<double>(static_cast<std::int64_t>(count)))
    usage_error("--sizes: '" + text + "' is not a whole number of samples of at least 1");
  return static_cast<std::int64_t>(count);
}

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : 0.5 * (values[half - 1] + values[half]);
}

struct Run {
  std::int64_t n = 0;
  double first_epoch_ms = 0, epoch_ms = 0, epoch_ms_min = 0, epoch_cpu_ms = 0;
};

Run measure(std::int64_t n, int repeats) {
  strider::DistributedSamplerConfig config;
  config.dataset_size = n;
  config.batch_size = 256;
  config.shuffle = true;
  config.seed = 0;
  strider::DistributedSampler sampler(config, 1, 0);
  Run run;
  run.n = n;
  std::vector<double> wall_ms, cpu_ms;
  for (int epoch = 0; epoch <= repeats; ++epoch) {
    const double cpu_start = thread_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    sampler.set_epoch(epoch);
    const double ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = 1e3 * (thread_cpu_seconds() - cpu_start);
    if (sampler.index_at(0) < 0 || sampler.index_at(0) >= n) {  // the order is there, and is used
      std::fprintf(stderr, "strider: error: epoch %d of N=%lld planned an index outside [0, N)\n", epoch,
                   static_cast<long long>(n));
      std::exit(1);
    }
    if (epoch == 0) {
      run.first_epoch_ms = ms;
    } else {
      wall_ms.push_back(ms);
      cpu_ms.push_back(cpu);
    }
  }
  run.epoch_ms = median(wall_ms);
  run.epoch_ms_min = *std::min_element(wall_ms.begin(), wall_ms.end());
  run.epoch_cpu_ms = median(cpu_ms);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg != "--sizes" && arg != "--repeats") usage_error("unknown option '" + arg + "'");
    if (i + 1 >= argc) usage_error(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--sizes") {
      sizes.clear();
      std::size_t from = 0;
      while (from <= value.size()) {
        const std::size_t comma = std::min(value.find(',', from), value.size());
        sizes.push_back(parse_size(value.substr(from, comma - from)));
        from = comma + 1;
      }
    } else {
      char* end = nullptr;
      const long parsed = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || parsed < 1 || parsed > 1000)
        usage_error("--repeats: '" + value + "' is not a count from 1 to 1000");
      repeats = static_cast<int>(parsed);
    }
  }
  if (sizes.empty()) sizes = {1000000, 10000000};
  try {
    std::printf("{\"runs\": [");
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const Run run = measure(sizes[k], repeats);
      std::printf(
          "%s\n  {\"n\": %lld, \"order_bytes\": %lld, \"first_epoch_ms\": %.3f, \"epoch_ms\": %.3f, \"epoch_ms_min\": "
          "%.3f, "
          "\"epoch_cpu_ms\": %.3f, \"ns_per_sample\": %.3f, \"repeats\": %d}",
          k == 0 ? "" : ",", static_cast<long long>(run.n), 8LL * static_cast<long long>(run.n), run.first_epoch_ms,
          run.epoch_ms, run.epoch_ms_min, run.epoch_cpu_ms, 1e6 * run.epoch_ms / static_cast<double>(run.n), repeats);
      std::fflush(stdout);
    }
    std::printf("\n]}\n");
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "strider: error: out of memory (each size N needs 8N bytes); try smaller --sizes\n");
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "strider: error: %s\n", error.what());
    return 1;
  }
  return 0;
}
