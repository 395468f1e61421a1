#include "strider/sampling/factory.hpp"

#include "strider/core/error.hpp"
#include "strider/sampling/distributed_sampler.hpp"

namespace strider {

std::vector<std::string> sampler_modes() { return {"distributed"}; }

std::unique_ptr<Sampler> make_sampler(const SamplerOptions& options, int world_size, int rank) {
  if (options.mode == "distributed") {
    DistributedSamplerConfig config;
    config.dataset_size = options.dataset_size;
    config.batch_size = options.batch_size;
    config.shuffle = options.shuffle;
    config.drop_last = options.drop_last;
    config.drop_last_batch = options.drop_last_batch;
    config.seed = options.seed;
    return std::make_unique<DistributedSampler>(config, world_size, rank);
  }
  std::string known;
  for (const std::string& mode : sampler_modes()) known += (known.empty() ? "" : ", ") + mode;
  STRIDER_THROW(UsageError, "unknown sampler '" + options.mode + "' (known: " + known + ")");
}

}  // namespace strider
