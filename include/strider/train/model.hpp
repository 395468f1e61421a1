#pragma once
/// \file
/// A model's shape from the dataset it trains on: the trainer resolves a ModelConfig (its kind,
/// features, vocabulary) against the file before a backend builds the model, so that backends take
/// numbers, not datasets.

#include "strider/device/model.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

/// Checks `config` against the dataset and fills what is left open: kind "auto" (mlp for fixed-size
/// samples, bag for sequences), features (0: the product of the sample shape), vocab (0: 256 for
/// 8-bit tokens, 65536 otherwise). Throws UsageError for impossible combinations (bag on fixed-size
/// samples, softmax/mlp on sequences, floating-point tokens, features that do not match the file,
/// num_classes < 2, non-positive sizes). Not collective.
ModelConfig resolve_model_config(ModelConfig config, const DatasetInfo& dataset);

}  // namespace strider
