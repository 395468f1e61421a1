#include "strider/sampling/factory.hpp"

#include "strider/core/error.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/streaming_sampler.hpp"

namespace strider {

namespace {

// The options every fixed-size mode shares (dataset, batch, shuffle, drop_last, seed).
template <typename Config>
Config fixed_size_config(const SamplerOptions& options) {
  Config config;
  config.dataset_size = options.dataset_size;
  config.batch_size = options.batch_size;
  config.shuffle = options.shuffle;
  config.drop_last = options.drop_last;
  config.drop_last_batch = options.drop_last_batch;
  config.seed = options.seed;
  return config;
}

}  // namespace

std::vector<std::string> sampler_modes() { return {"distributed", "streaming"}; }

std::unique_ptr<Sampler> make_sampler(const SamplerOptions& options, int world_size, int rank) {
  if (options.mode == "distributed")
    return std::make_unique<DistributedSampler>(fixed_size_config<DistributedSamplerConfig>(options), world_size, rank);
  if (options.mode == "streaming")
    return std::make_unique<StreamingSampler>(fixed_size_config<StreamingSamplerConfig>(options), world_size, rank);
  std::string known;
  for (const std::string& mode : sampler_modes()) known += (known.empty() ? "" : ", ") + mode;
  STRIDER_THROW(UsageError, "unknown sampler '" + options.mode + "' (known: " + known + ")");
}

}  // namespace strider
