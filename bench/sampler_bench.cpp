// Indices per second per core for every sampling mode make_sampler knows, and for the raw Feistel
// permutation behind the streaming modes. Single-threaded: the rate is per core.
//   strider_sampler_bench [--benchmark_filter=streaming]
#include <benchmark/benchmark.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "strider/sampling/factory.hpp"
#include "strider/sampling/feistel_permutation.hpp"
#include "strider/sampling/random.hpp"
#include "strider/sampling/synthetic_lengths.hpp"

namespace {

constexpr std::int64_t dataset_size = 1'000'000;
constexpr int world_size = 4;
constexpr std::int64_t batch_size = 256;

// The options one mode needs to run on `dataset_size` samples (labels and lengths synthetic).
strider::SamplerOptions options_for(const std::string& mode) {
  strider::SamplerOptions options;
  options.mode = mode;
  options.dataset_size = dataset_size;
  options.batch_size = batch_size;
  options.seed = 1;
  auto labels = std::make_shared<std::vector<std::int32_t>>(dataset_size);
  for (std::int64_t i = 0; i < dataset_size; ++i)
    (*labels)[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 10);
  options.labels = labels;
  options.lengths = std::make_shared<const std::vector<std::int64_t>>(
      strider::synthetic_lengths("lognormal:median=128,min=8,max=2048", dataset_size, 1));
  options.max_tokens = 16384;
  options.block_size = 1024;
  return options;
}

// Every batch of rank 1's epoch, round and round; the counter is indices delivered per second.
void sampler_batches(benchmark::State& state, const std::string& mode) {
  const strider::SamplerOptions options = options_for(mode);
  std::unique_ptr<strider::Sampler> sampler = strider::make_sampler(options, world_size, 1);
  sampler->set_epoch(1);
  std::vector<std::int64_t> indices;
  std::int64_t step = 0, delivered = 0;
  for (auto _ : state) {
    sampler->batch(step, indices);
    benchmark::DoNotOptimize(indices.data());
    delivered += static_cast<std::int64_t>(indices.size());
    if (++step == sampler->num_steps()) step = 0;
  }
  state.counters["indices_per_s"] = benchmark::Counter(static_cast<double>(delivered), benchmark::Counter::kIsRate);
}

// set_epoch's cost (the O(N) part of modes that plan the epoch up front), in samples per second.
void sampler_set_epoch(benchmark::State& state, const std::string& mode) {
  const strider::SamplerOptions options = options_for(mode);
  std::unique_ptr<strider::Sampler> sampler = strider::make_sampler(options, world_size, 1);
  std::int64_t epoch = 0;
  for (auto _ : state) sampler->set_epoch(++epoch % 1000);
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * dataset_size), benchmark::Counter::kIsRate);
}

// The permutation alone over a domain of 2^range(0) + 1 (cycle walking close to its worst, ~2
// network evaluations per index) or, with range(1) == 1, exactly 2^range(0) (no walking).
void feistel_permutation(benchmark::State& state) {
  const std::uint64_t size = (std::uint64_t{1} << state.range(0)) + (state.range(1) == 1 ? 0 : 1);
  const strider::FeistelPermutation permutation(size, strider::derive_seed(1, 0, 0));
  std::vector<std::int64_t> values(1024);
  const std::int64_t position_mask = (std::int64_t{1} << state.range(0)) - 1;  // positions < size
  std::int64_t next = 0;
  for (auto _ : state) {
    for (std::int64_t& value : values) value = next++ & position_mask;
    permutation.permute(values.data(), values.size());
    benchmark::DoNotOptimize(values.data());
  }
  state.counters["indices_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * 1024), benchmark::Counter::kIsRate);
}

// One index at a time through operator() (the O(1) random access of index_at).
void feistel_single_index(benchmark::State& state) {
  const std::uint64_t size = (std::uint64_t{1} << state.range(0)) + 1;
  const strider::FeistelPermutation permutation(size, strider::derive_seed(1, 0, 0));
  std::uint64_t position = 0, sum = 0;
  for (auto _ : state) {
    sum += permutation(position);
    if (++position == size) position = 0;
  }
  benchmark::DoNotOptimize(sum);
  state.counters["indices_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

int register_modes() {
  for (const std::string& mode : strider::sampler_modes()) {
    benchmark::RegisterBenchmark(("batches/" + mode).c_str(), sampler_batches, mode);
    benchmark::RegisterBenchmark(("set_epoch/" + mode).c_str(), sampler_set_epoch, mode)->Unit(benchmark::kMillisecond);
  }
  return 0;
}
const int registered = register_modes();

}  // namespace

BENCHMARK(feistel_permutation)->Args({20, 0})->Args({20, 1})->Args({40, 0})->Args({62, 0});
BENCHMARK(feistel_single_index)->Arg(20)->Arg(40);

BENCHMARK_MAIN();
