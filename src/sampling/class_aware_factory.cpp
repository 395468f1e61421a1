#include "sampling/class_aware_factory.hpp"

#include "strider/core/error.hpp"
#include "strider/sampling/balanced_sampler.hpp"
#include "strider/sampling/stratified_sampler.hpp"
#include "strider/sampling/weighted_sampler.hpp"

namespace strider::detail {

namespace {

std::shared_ptr<const ClassIndex> class_index_of(const SamplerOptions& options) {
  if (!options.labels)
    STRIDER_THROW(UsageError,
                  "the " + options.mode + " sampler needs class labels (--class-counts or a labels dataset)");
  if (static_cast<std::int64_t>(options.labels.size()) != options.dataset_size)
    STRIDER_THROW(UsageError, options.mode + ": " + std::to_string(options.labels.size()) +
                                  " labels for a dataset of " + std::to_string(options.dataset_size) + " samples");
  if (options.class_index) {
    if (options.class_index->size() != options.dataset_size)
      STRIDER_THROW(UsageError, options.mode + ": a class index of " + std::to_string(options.class_index->size()) +
                                    " samples for a dataset of " + std::to_string(options.dataset_size));
    return options.class_index;
  }
  return std::make_shared<const ClassIndex>(options.labels);
}

// The fields every class-aware configuration shares.
template <typename Config>
Config common_config(const SamplerOptions& options) {
  Config config;
  config.batch_size = options.batch_size;
  config.drop_last = options.drop_last;
  config.seed = options.seed;
  return config;
}

}  // namespace

std::vector<std::string> class_aware_modes() {
  return {"balanced", "weighted", "stratified"};
}

std::unique_ptr<Sampler> make_class_aware_sampler(const SamplerOptions& options, int world_size, int rank) {
  if (options.mode == "balanced") {
    auto config = common_config<BalancedSamplerConfig>(options);
    config.classes = class_index_of(options);
    parse_balance(options.balance, config);
    config.shuffle = options.shuffle;
    return std::make_unique<BalancedSampler>(config, world_size, rank);
  }
  if (options.mode == "weighted") {
    auto config = common_config<WeightedSamplerConfig>(options);
    if (options.sample_weights) {
      config.sample_weights = options.sample_weights;
      if (static_cast<std::int64_t>(options.sample_weights->size()) != options.dataset_size)
        STRIDER_THROW(UsageError, "weighted: " + std::to_string(options.sample_weights->size()) +
                                      " sample weights for a dataset of " + std::to_string(options.dataset_size) +
                                      " samples");
      if (options.labels) config.classes = class_index_of(options);
    } else {
      config.classes = class_index_of(options);
    }
    config.class_weights = options.class_weights;
    config.num_samples = options.num_samples;
    config.drop_last_batch = options.drop_last_batch;
    return std::make_unique<WeightedSampler>(config, world_size, rank);
  }
  if (options.mode == "stratified") {
    auto config = common_config<StratifiedSamplerConfig>(options);
    config.classes = class_index_of(options);
    parse_stratify_target(options.stratify_target, config);
    config.num_samples = options.num_samples;
    config.shuffle = options.shuffle;
    return std::make_unique<StratifiedSampler>(config, world_size, rank);
  }
  return nullptr;
}

}  // namespace strider::detail
