#include "strider/sampling/factory.hpp"

#include <algorithm>

#include "sampling/class_aware_factory.hpp"
#include "strider/core/error.hpp"
#include "strider/core/option_text.hpp"
#include "strider/sampling/block_sampler.hpp"
#include "strider/sampling/bucketed_sampler.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/streaming_sampler.hpp"

namespace strider {

namespace {

// The partition every fixed-size mode shares (dataset, batch, shuffle, drop_last, seed).
template <typename Config>
Config fixed_size_config(const SamplerOptions& options) {
  Config config;
  static_cast<PartitionConfig&>(config) = options;
  return config;
}

}  // namespace

std::vector<std::string> sampler_modes() {
  std::vector<std::string> modes = {"distributed", "streaming", "bucketed", "block"};
  for (const std::string& mode : detail::class_aware_modes()) modes.push_back(mode);
  return modes;
}

bool sampler_needs_labels(const std::string& mode) {
  const std::vector<std::string> modes = detail::class_aware_modes();
  return std::find(modes.begin(), modes.end(), mode) != modes.end();
}

std::unique_ptr<Sampler> make_sampler(const SamplerOptions& options, int world_size, int rank) {
  if (options.mode == "distributed") {
    DistributedSamplerConfig config = fixed_size_config<DistributedSamplerConfig>(options);
    config.shared_order = options.shared_order;
    return std::make_unique<DistributedSampler>(config, world_size, rank);
  }
  if (options.mode == "streaming")
    return std::make_unique<StreamingSampler>(fixed_size_config<StreamingSamplerConfig>(options), world_size, rank);
  if (options.mode == "bucketed") {
    if (options.lengths && static_cast<std::int64_t>(options.lengths.size()) != options.dataset_size)
      STRIDER_THROW(UsageError, "bucketed: " + std::to_string(options.lengths.size()) + " lengths for a dataset of " +
                                    std::to_string(options.dataset_size) + " samples");
    BucketedSamplerConfig config;
    config.lengths = options.lengths;
    config.max_tokens = options.max_tokens;
    config.max_batch_size = options.max_batch_size;
    config.batch_size_multiple = options.batch_size_multiple;
    config.megabatch = options.megabatch;
    config.step_group = options.step_group;
    config.most_expensive_first = options.most_expensive_first;
    config.shuffle = options.shuffle;
    config.seed = options.seed;
    config.shared_plan = options.shared_plan;
    return std::make_unique<BucketedSampler>(config, world_size, rank);
  }
  if (options.mode == "block") {
    BlockSamplerConfig config = fixed_size_config<BlockSamplerConfig>(options);
    config.block_size = options.block_size;
    config.block_window = options.block_window;
    config.shuffle_blocks = options.shuffle_blocks;
    if (!options.shuffle_blocks && options.block_size == 0) {  // one block per rank, one window: DLIO's local shuffle
      const std::int64_t ranks = std::max(1, world_size);
      config.block_size = std::max<std::int64_t>(1, options.dataset_size / ranks + (options.dataset_size % ranks != 0));
      config.block_window = 1;
    }
    return std::make_unique<BlockSampler>(config, world_size, rank);
  }
  if (auto sampler = detail::make_class_aware_sampler(options, world_size, rank)) return sampler;
  check_choice(options.mode, sampler_modes(), "sampler");
  STRIDER_THROW(UsageError, "no sampler for mode '" + options.mode + "'");
}

}  // namespace strider
