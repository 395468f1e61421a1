#pragma once
/// \file
/// The models strider-train trains, described by one config, with parameters in one flat float
/// vector (so that gradients all-reduce in one call):
///
/// - `softmax`: softmax regression on fixed-size features. logits = x W + b.
///     W [features, num_classes], b [num_classes].
/// - `mlp`: two-layer perceptron with ReLU. logits = relu(x W1 + b1) W2 + b2.
///     W1 [features, hidden], b1 [hidden], W2 [hidden, num_classes], b2 [num_classes].
/// - `bag`: bag of embeddings on token sequences. logits = mean(E[t] over the real tokens of the row)
///     W + b; a row without tokens has the zero mean. E [vocab, embed_dim], W [embed_dim, num_classes],
///     b [num_classes]. Token ids outside 0..vocab-1 are hashed into range (id mod vocab, made
///     non-negative): the hashing trick, never an error.
///
/// Matrices are row-major and the blocks lie in the order listed. Every backend (CPU, CUDA) uses
/// this layout and initial_parameters(), so parameters and checkpoints move between backends.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strider/device/element_conversion.hpp"

namespace strider {

/// What model to train. Backends take it resolved: resolve_model_config (strider/train/model.hpp)
/// fills the fields that depend on the data.
struct ModelConfig {
  std::string kind = "auto";    ///< auto | softmax | mlp | bag (auto: mlp for features, bag for sequences)
  std::int64_t features = 0;    ///< inputs per fixed-size sample (0: from the dataset)
  std::int64_t hidden = 64;     ///< mlp: hidden units
  int num_classes = 2;          ///< labels are 0..num_classes-1
  std::int64_t vocab = 0;       ///< bag: embedding rows (0: 256 for 8-bit tokens, 65536 otherwise)
  std::int64_t embed_dim = 32;  ///< bag: embedding width
  std::int64_t seed = 0;        ///< initial parameters are a pure function of (config, seed)
  /// softmax and mlp: inputs become `(x - mean) / stddev` (per feature or per channel) as the
  /// element conversion converts them to float32, on the backend's device; none: as stored.
  std::optional<Normalization> normalization;
};

/// What one forward/backward pass over a batch measured (sums, so that they add across ranks).
struct StepResult {
  double loss_sum = 0.0;     ///< sum over the batch of the cross-entropy (natural log)
  std::int64_t correct = 0;  ///< samples whose argmax prediction (before the update) equals the label
  std::int64_t count = 0;    ///< samples in the batch
  /// Per class (index = label, num_classes entries; empty for an empty batch): samples in the batch.
  std::vector<std::int64_t> samples_per_class;
  /// Per class: of those samples, the ones counted in `correct` (the entries sum to it).
  std::vector<std::int64_t> correct_per_class;
};

/// One named block of the flat parameter vector.
struct ParameterBlock {
  std::string name;         ///< "W", "b", "W1", "b1", "W2", "b2", "E"
  std::int64_t offset = 0;  ///< first element in the flat vector
  std::int64_t rows = 0;    ///< rows (1 for a bias)
  std::int64_t cols = 0;    ///< columns
};

/// Throws UsageError unless `config` is resolved and consistent (kind known, sizes positive).
void validate_model_config(const ModelConfig& config);

/// The blocks of the flat parameter vector of a resolved config, in order.
std::vector<ParameterBlock> parameter_layout(const ModelConfig& config);

/// Length of the flat parameter vector of a resolved config.
std::int64_t parameter_count(const ModelConfig& config);

/// Deterministic initial parameters: a pure function of the config (its seed included), identical
/// on every rank, machine and backend. Weights uniform in +-sqrt(6 / (fan_in + fan_out)) (mlp's first
/// layer: +-sqrt(6 / fan_in)), embeddings uniform in +-0.5, biases zero.
std::vector<float> initial_parameters(const ModelConfig& config);

/// One line "kind=mlp features=64 hidden=64 num_classes=2 vocab=0 embed_dim=32 seed=7": for logs and
/// for checking a checkpoint's model against the run's (every field, in this order).
std::string model_config_text(const ModelConfig& config);

/// Parses model_config_text(). Throws DataError naming the text when it is malformed.
ModelConfig parse_model_config_text(const std::string& text);

}  // namespace strider
