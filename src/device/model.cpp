// Model configs: validation, the flat parameter layout, deterministic initialisation and the
// one-line text form checkpoints compare.
#include "strider/device/model.hpp"

#include <cmath>
#include <sstream>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"

namespace strider {
namespace {

// A uniform float in [-limit, limit) for element `index` of block `block`: a pure function of the
// seed, so every rank and backend computes the same value without sharing a generator state.
float uniform_parameter(std::int64_t seed, std::uint64_t block, std::int64_t index, double limit) noexcept {
  const std::uint64_t bits = mix64(derive_seed(seed, 0, 0x7472616e00ULL + block) ^ static_cast<std::uint64_t>(index));
  const double unit = static_cast<double>(bits >> 11) * 0x1.0p-53;  // [0, 1)
  return static_cast<float>((2.0 * unit - 1.0) * limit);
}

}  // namespace

void validate_model_config(const ModelConfig& config) {
  const std::string& kind = config.kind;
  STRIDER_REQUIRE(kind == "softmax" || kind == "mlp" || kind == "bag",
                  "model kind must be softmax, mlp or bag (after auto is resolved), got '" + kind + "'");
  STRIDER_REQUIRE(config.num_classes >= 2,
                  "the model needs at least 2 classes, got " + std::to_string(config.num_classes));
  if (kind == "bag") {
    STRIDER_REQUIRE(config.vocab > 0, "bag model: vocab must be positive, got " + std::to_string(config.vocab));
    STRIDER_REQUIRE(config.embed_dim > 0,
                    "bag model: embed_dim must be positive, got " + std::to_string(config.embed_dim));
    STRIDER_REQUIRE(!config.normalization, "bag model: token ids are not normalized (normalization is for features)");
  } else {
    STRIDER_REQUIRE(config.features > 0,
                    kind + " model: features must be positive, got " + std::to_string(config.features));
    // The statistics must fit the samples (checked as the conversion expands them).
    if (config.normalization)
      ElementConversion(ElementType::float32, config.features,
                        ConversionOptions{ElementType::float32, config.normalization});
  }
  if (kind == "mlp") {
    STRIDER_REQUIRE(config.hidden > 0, "mlp model: hidden must be positive, got " + std::to_string(config.hidden));
  }
}

std::vector<ParameterBlock> parameter_layout(const ModelConfig& config) {
  validate_model_config(config);
  const std::int64_t classes = config.num_classes;
  std::vector<ParameterBlock> blocks;
  std::int64_t offset = 0;
  auto add = [&](const char* name, std::int64_t rows, std::int64_t cols) {
    blocks.push_back(ParameterBlock{name, offset, rows, cols});
    offset += rows * cols;
  };
  if (config.kind == "softmax") {
    add("W", config.features, classes);
    add("b", 1, classes);
  } else if (config.kind == "mlp") {
    add("W1", config.features, config.hidden);
    add("b1", 1, config.hidden);
    add("W2", config.hidden, classes);
    add("b2", 1, classes);
  } else {
    add("E", config.vocab, config.embed_dim);
    add("W", config.embed_dim, classes);
    add("b", 1, classes);
  }
  return blocks;
}

std::int64_t parameter_count(const ModelConfig& config) {
  const auto blocks = parameter_layout(config);
  return blocks.back().offset + blocks.back().rows * blocks.back().cols;
}

std::vector<float> initial_parameters(const ModelConfig& config) {
  const auto blocks = parameter_layout(config);
  std::vector<float> parameters(static_cast<std::size_t>(parameter_count(config)), 0.0f);
  for (std::size_t block = 0; block < blocks.size(); ++block) {
    const ParameterBlock& b = blocks[block];
    if (b.rows == 1) continue;                                                 // biases start at zero
    double limit = std::sqrt(6.0 / static_cast<double>(b.rows + b.cols));      // Glorot uniform
    if (b.name == "W1") limit = std::sqrt(6.0 / static_cast<double>(b.rows));  // He uniform before ReLU
    if (b.name == "E") limit = 0.5;
    for (std::int64_t i = 0; i < b.rows * b.cols; ++i) {
      parameters[static_cast<std::size_t>(b.offset + i)] = uniform_parameter(config.seed, block, i, limit);
    }
  }
  return parameters;
}

std::string model_config_text(const ModelConfig& config) {
  std::ostringstream text;
  text << "kind=" << config.kind << " features=" << config.features << " hidden=" << config.hidden
       << " num_classes=" << config.num_classes << " vocab=" << config.vocab << " embed_dim=" << config.embed_dim
       << " seed=" << config.seed;
  return text.str();
}

ModelConfig parse_model_config_text(const std::string& text) {
  ModelConfig config;
  std::istringstream stream(text);
  std::string item;
  int seen = 0;
  auto fail = [&](const std::string& why) {
    STRIDER_THROW(DataError, "malformed model config '" + text + "': " + why);
  };
  while (stream >> item) {
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos) fail("'" + item + "' is not key=value");
    const std::string key = item.substr(0, equals);
    const std::string value = item.substr(equals + 1);
    if (key == "kind") {
      config.kind = value;
    } else {
      std::int64_t number = 0;
      std::size_t used = 0;
      try {
        number = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size()) fail("'" + value + "' is not an integer");
      if (key == "features")
        config.features = number;
      else if (key == "hidden")
        config.hidden = number;
      else if (key == "num_classes")
        config.num_classes = static_cast<int>(number);
      else if (key == "vocab")
        config.vocab = number;
      else if (key == "embed_dim")
        config.embed_dim = number;
      else if (key == "seed")
        config.seed = number;
      else
        fail("unknown key '" + key + "'");
    }
    ++seen;
  }
  if (seen != 7) fail("expected 7 fields, found " + std::to_string(seen));
  return config;
}

}  // namespace strider
