// A model's shape from the dataset it trains on.
#include "strider/train/model.hpp"

#include "strider/core/error.hpp"
#include "strider/train/batch_input.hpp"

namespace strider {

ModelConfig resolve_model_config(ModelConfig config, const DatasetInfo& dataset) {
  if (config.kind == "auto") config.kind = dataset.variable_length ? "bag" : "mlp";
  if (dataset.variable_length) {
    STRIDER_REQUIRE(config.kind == "bag", "model " + config.kind + " needs fixed-size samples, but " + dataset.path +
                                              " holds token sequences: use the bag model");
    STRIDER_REQUIRE(element_is_integer(dataset.element_type),
                    std::string("the bag model needs integer token ids, but the tokens of ") + dataset.path + " are " +
                        element_name(dataset.element_type));
    if (config.vocab == 0) config.vocab = element_bytes(dataset.element_type) == 1 ? 256 : 65536;
  } else {
    STRIDER_REQUIRE(config.kind != "bag", "the bag model needs token sequences, but " + dataset.path +
                                              " holds fixed-size samples: use softmax or mlp");
    const std::int64_t features = features_per_sample(dataset);
    if (config.features == 0) config.features = features;
    STRIDER_REQUIRE(config.features == features, "the model expects " + std::to_string(config.features) +
                                                     " features per sample, but samples of " + dataset.path + " have " +
                                                     std::to_string(features));
  }
  validate_model_config(config);
  return config;
}

}  // namespace strider
