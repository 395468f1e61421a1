// chunk_cache_sim: what a cache of decompressed chunks would save --lookahead, from the plan alone
// (no file is read). For one rank of R, the sampler's plan of --epochs epochs is cut into windows of
// --lookahead steps as the Loader cuts it; each window reads its distinct chunks once; a cache of C
// chunks evicting the chunk whose next use is farthest (pipeline_detail::count_chunk_decompressions)
// saves the rest. Prints one JSON object: per epoch, the distinct chunks (the least possible), the
// decompressions without a cache, and with each cache size (chunks and MiB of decompressed rows).
//
//   g++ -O2 -std=c++17 -Iinclude -Ibuild/include -Isrc bench/scripts/chunk_cache_sim.cpp \
//       -Lbuild/lib -lstrider -Wl,-rpath,$PWD/build/lib -o chunk_cache_sim
//   chunk_cache_sim [--samples 1000000] [--chunk-rows 1024] [--row-bytes 256] [--batch 256]
//       [--ranks 2] [--rank 0] [--lookahead 256] [--epochs 2] [--sampler distributed] [--seed 0]
//       [--cache-mib 16,64,128]

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/lookahead.hpp"
#include "strider/sampling/factory.hpp"

int main(int argc, char** argv) {
  std::int64_t samples = 1000000, chunk_rows = 1024, row_bytes = 256, batch = 256, lookahead = 256, epochs = 2;
  int ranks = 2, rank = 0;
  std::uint64_t seed = 0;
  std::string sampler_mode = "distributed", cache_mib = "16,64,128";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i], value = argv[i + 1];
    if (name == "--samples")
      samples = std::atoll(value.c_str());
    else if (name == "--chunk-rows")
      chunk_rows = std::atoll(value.c_str());
    else if (name == "--row-bytes")
      row_bytes = std::atoll(value.c_str());
    else if (name == "--batch")
      batch = std::atoll(value.c_str());
    else if (name == "--lookahead")
      lookahead = std::atoll(value.c_str());
    else if (name == "--epochs")
      epochs = std::atoll(value.c_str());
    else if (name == "--ranks")
      ranks = std::atoi(value.c_str());
    else if (name == "--rank")
      rank = std::atoi(value.c_str());
    else if (name == "--seed")
      seed = std::strtoull(value.c_str(), nullptr, 10);
    else if (name == "--sampler")
      sampler_mode = value;
    else if (name == "--cache-mib")
      cache_mib = value;
    else {
      std::fprintf(stderr, "chunk_cache_sim: unknown option %s\n", name.c_str());
      return 2;
    }
  }
  strider::SamplerOptions options;
  options.mode = sampler_mode;
  options.dataset_size = samples;
  options.batch_size = batch;
  options.seed = seed;
  auto sampler = strider::make_sampler(options, ranks, rank);
  std::vector<std::vector<std::int64_t>> windows;
  std::set<std::int64_t> distinct;
  std::vector<std::int64_t> indices;
  for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
    sampler->set_epoch(epoch);
    const std::int64_t steps = sampler->num_steps();
    for (std::int64_t first = 0; first < steps; first += lookahead) {
      std::vector<std::int64_t> chunks;
      for (std::int64_t step = first; step < std::min(steps, first + lookahead); ++step) {
        sampler->batch(step, indices);
        for (std::int64_t row : indices) chunks.push_back(row / chunk_rows);
      }
      distinct.insert(chunks.begin(), chunks.end());
      windows.push_back(std::move(chunks));
    }
  }
  const double chunk_mib = static_cast<double>(chunk_rows * row_bytes) / (1 << 20);
  const auto per_epoch = [&](std::int64_t count) { return static_cast<double>(count) / static_cast<double>(epochs); };
  std::printf(
      "{\"samples\": %lld, \"chunk_rows\": %lld, \"ranks\": %d, \"lookahead\": %lld, \"epochs\": %lld, "
      "\"windows_per_epoch\": %.1f, \"distinct_chunks\": %zu, \"decompressions_per_epoch\": %.0f, \"cache\": [",
      static_cast<long long>(samples), static_cast<long long>(chunk_rows), ranks, static_cast<long long>(lookahead),
      static_cast<long long>(epochs), static_cast<double>(windows.size()) / static_cast<double>(epochs),
      distinct.size(), per_epoch(strider::pipeline_detail::count_chunk_decompressions(windows, 0)));
  std::stringstream sizes(cache_mib);
  std::string size;
  for (bool first = true; std::getline(sizes, size, ','); first = false) {
    const auto chunks = static_cast<std::int64_t>(std::atof(size.c_str()) / chunk_mib);
    std::printf("%s{\"mib\": %s, \"chunks\": %lld, \"decompressions_per_epoch\": %.0f}", first ? "" : ", ",
                size.c_str(), static_cast<long long>(chunks),
                per_epoch(strider::pipeline_detail::count_chunk_decompressions(windows, chunks)));
  }
  std::printf("]}\n");
  return 0;
}
