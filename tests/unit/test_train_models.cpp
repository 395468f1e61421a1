// The training models on the CPU backend: finite-difference gradient checks for softmax, mlp and bag;
// each model learns a small separable problem; the bag model's padding never counts; a step's
// per-class counts are its predictions'; configs, deterministic initialisation, element types, SGD
// with momentum.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "device/activation.hpp"
#include "strider/core/error.hpp"
#include "strider/device/backend.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/sampling/random.hpp"
#include "strider/train/model.hpp"

using namespace strider;

namespace {

/// A deterministic uniform double in [0, 1) from (seed, index).
double unit(std::uint64_t seed, std::uint64_t index) {
  return static_cast<double>(mix64(mix64(seed) ^ index) >> 11) * 0x1.0p-53;
}

/// Fixed-size samples (float32) with labels: class c has its mean at +3 on feature c (mod features)
/// and uniform noise in [-1, 1) elsewhere.
struct FeatureData {
  std::int64_t count = 0;
  std::int64_t features = 0;
  std::vector<float> samples;
  std::vector<std::int32_t> labels;

  BatchInput input(std::int64_t first, std::int64_t rows) const {
    BatchInput batch;
    batch.samples = reinterpret_cast<const std::byte*>(samples.data() + first * features);
    batch.type = ElementType::float32;
    batch.count = rows;
    batch.features = features;
    batch.labels = labels.data() + first;
    return batch;
  }
  BatchInput all() const { return input(0, count); }
};

FeatureData make_features(std::int64_t count, std::int64_t features, int classes, std::uint64_t seed) {
  FeatureData data;
  data.count = count;
  data.features = features;
  data.samples.resize(static_cast<std::size_t>(count * features));
  data.labels.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<std::int32_t>(mix64(seed + static_cast<std::uint64_t>(i)) % classes);
    data.labels[static_cast<std::size_t>(i)] = label;
    for (std::int64_t f = 0; f < features; ++f) {
      double value = 2.0 * unit(seed, static_cast<std::uint64_t>(i * features + f)) - 1.0;
      if (f == label % features) value += 3.0;
      data.samples[static_cast<std::size_t>(i * features + f)] = static_cast<float>(value);
    }
  }
  return data;
}

/// Token sequences (uint16) with labels: rows of class c draw 80% of their tokens from their class's
/// half of the vocabulary, the rest from anywhere; lengths 1..max_length.
struct SequenceData {
  std::int64_t count = 0;
  std::vector<std::uint16_t> tokens;
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int32_t> labels;

  BatchInput input(std::int64_t first, std::int64_t rows) const {
    BatchInput batch;
    batch.samples = reinterpret_cast<const std::byte*>(tokens.data() + offsets[static_cast<std::size_t>(first)]);
    batch.type = ElementType::uint16;
    batch.count = rows;
    batch.labels = labels.data() + first;
    batch.offsets = offsets.data() + first;  // offsets[first] need not be 0
    return batch;
  }
  BatchInput all() const { return input(0, count); }
};

SequenceData make_sequences(std::int64_t count, std::int64_t vocab, std::int64_t max_length, std::uint64_t seed) {
  SequenceData data;
  data.count = count;
  std::uint64_t draw = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<std::int32_t>(mix64(seed + static_cast<std::uint64_t>(i)) % 2);
    data.labels.push_back(label);
    const auto length = 1 + static_cast<std::int64_t>(unit(seed, draw++) * static_cast<double>(max_length));
    for (std::int64_t t = 0; t < length; ++t) {
      const bool own_half = unit(seed, draw++) < 0.8;
      const auto pick =
          static_cast<std::int64_t>(unit(seed, draw++) * static_cast<double>(own_half ? vocab / 2 : vocab));
      data.tokens.push_back(static_cast<std::uint16_t>(own_half ? label * (vocab / 2) + pick : pick));
    }
    data.offsets.push_back(static_cast<std::int64_t>(data.tokens.size()));
  }
  return data;
}

ModelConfig feature_config(const std::string& kind, std::int64_t features, int classes, std::int64_t hidden = 8) {
  ModelConfig config;
  config.kind = kind;
  config.features = features;
  config.num_classes = classes;
  config.hidden = hidden;
  config.seed = 5;
  return config;
}

ModelConfig bag_config(std::int64_t vocab, std::int64_t embed_dim = 8) {
  ModelConfig config;
  config.kind = "bag";
  config.vocab = vocab;
  config.embed_dim = embed_dim;
  config.num_classes = 2;
  config.seed = 9;
  return config;
}

/// Compares the backend's gradient of the summed loss with central differences, on every parameter
/// or (for big models) on `checked` evenly spread ones. Returns the worst error over the tolerance.
void check_gradients(Backend& backend, const BatchInput& input, std::int64_t checked) {
  const std::vector<float> parameters = backend.parameters();
  backend.zero_gradients();
  backend.forward_backward(input);
  const std::vector<float> analytic = backend.gradients();
  const auto total = static_cast<std::int64_t>(parameters.size());
  const std::int64_t stride = std::max<std::int64_t>(1, total / checked);
  const float step = 5e-3f;
  std::int64_t compared = 0;
  std::int64_t nonzero = 0;
  for (std::int64_t i = 0; i < total; i += stride) {
    auto loss_at = [&](float delta) {
      std::vector<float> moved = parameters;
      moved[static_cast<std::size_t>(i)] += delta;
      backend.set_parameters(moved);
      backend.zero_gradients();
      return backend.forward_backward(input).loss_sum;
    };
    const double numeric = (loss_at(step) - loss_at(-step)) / (2.0 * static_cast<double>(step));
    const double exact = analytic[static_cast<std::size_t>(i)];
    INFO("parameter " << i << ": analytic " << exact << ", numeric " << numeric);
    REQUIRE(std::abs(exact - numeric) <= 5e-3 + 2e-2 * std::max(std::abs(exact), std::abs(numeric)));
    ++compared;
    if (std::abs(exact) > 1e-3) ++nonzero;
  }
  backend.set_parameters(parameters);
  backend.zero_gradients();
  REQUIRE(compared >= std::min<std::int64_t>(total, checked));
  REQUIRE(nonzero * 2 >= compared / 2);  // the check is not vacuous: most compared gradients are nonzero
}

/// Largest |value|.
double max_abs_value(const std::vector<float>& values) {
  double largest = 0.0;
  for (float value : values) largest = std::max(largest, std::abs(static_cast<double>(value)));
  return largest;
}

/// Plain SGD over the data in batches, cycling; returns the accuracy of predict() on all of it.
template <typename Data>
double train_and_evaluate(Backend& backend, const Data& data, std::int64_t batch, int steps, float learning_rate) {
  std::int64_t first = 0;
  for (int step = 0; step < steps; ++step) {
    const std::int64_t rows = std::min(batch, data.count - first);
    const StepResult result = backend.forward_backward(data.input(first, rows));
    backend.scale_gradients(result.count);
    backend.apply_sgd(learning_rate, 0.9f);
    first = first + rows >= data.count ? 0 : first + rows;
  }
  std::vector<std::int32_t> predictions(static_cast<std::size_t>(data.count));
  backend.predict(data.all(), predictions.data());
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < data.count; ++i) {
    correct += predictions[static_cast<std::size_t>(i)] == data.labels[static_cast<std::size_t>(i)] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(data.count);
}

}  // namespace

TEST_CASE("gradients match finite differences for softmax, mlp and bag", "[train][model]") {
  CpuBackend backend;
  SECTION("softmax") {
    backend.initialize(feature_config("softmax", 5, 3));
    check_gradients(backend, make_features(7, 5, 3, 1).all(), 1000);
  }
  SECTION("mlp") {
    backend.initialize(feature_config("mlp", 5, 3, 6));
    check_gradients(backend, make_features(7, 5, 3, 2).all(), 1000);
  }
  SECTION("bag") {
    backend.initialize(bag_config(12, 4));
    // 5 rows, lengths 1..6, a token repeated within a row, offsets not starting at 0.
    const SequenceData data = make_sequences(6, 12, 6, 3);
    check_gradients(backend, data.input(1, 5), 1000);
  }
}

TEST_CASE("each model learns a small separable problem to at least 0.9 accuracy", "[train][model]") {
  CpuBackend backend;
  SECTION("softmax") {
    backend.initialize(feature_config("softmax", 8, 3));
    const double accuracy = train_and_evaluate(backend, make_features(600, 8, 3, 11), 32, 200, 0.05f);
    INFO("softmax accuracy " << accuracy);
    REQUIRE(accuracy >= 0.9);
  }
  SECTION("mlp") {
    backend.initialize(feature_config("mlp", 8, 3, 16));
    const double accuracy = train_and_evaluate(backend, make_features(600, 8, 3, 12), 32, 200, 0.05f);
    INFO("mlp accuracy " << accuracy);
    REQUIRE(accuracy >= 0.9);
  }
  SECTION("bag") {
    backend.initialize(bag_config(40, 8));
    const double accuracy = train_and_evaluate(backend, make_sequences(600, 40, 20, 13), 32, 300, 0.5f);
    INFO("bag accuracy " << accuracy);
    REQUIRE(accuracy >= 0.9);
  }
}

TEST_CASE("bag of embeddings: padding never counts, each row sees only its own tokens", "[train][model]") {
  CpuBackend backend;
  backend.initialize(bag_config(50, 6));
  // Rows of very different lengths (1 and 40): if padding to the longest row counted, the short row's
  // mean would change with its neighbour.
  SequenceData data;
  data.count = 3;
  data.tokens = {7};
  for (int t = 0; t < 40; ++t) data.tokens.push_back(static_cast<std::uint16_t>(t));
  data.tokens.insert(data.tokens.end(), {3, 3, 9});
  data.offsets = {0, 1, 41, 44};
  data.labels = {1, 0, 1};

  StepResult together = backend.forward_backward(data.all());
  const std::vector<float> together_gradients = backend.gradients();
  backend.zero_gradients();
  double separate_loss = 0.0;
  std::vector<std::int32_t> together_predictions(3), alone_prediction(1);
  backend.predict(data.all(), together_predictions.data());
  for (std::int64_t row = 0; row < 3; ++row) {
    separate_loss += backend.forward_backward(data.input(row, 1)).loss_sum;
    backend.predict(data.input(row, 1), alone_prediction.data());
    REQUIRE(alone_prediction[0] == together_predictions[static_cast<std::size_t>(row)]);
  }
  REQUIRE(together.count == 3);
  REQUIRE(separate_loss == Approx(together.loss_sum).epsilon(1e-6));
  const std::vector<float> separate_gradients = backend.gradients();
  for (std::size_t i = 0; i < separate_gradients.size(); ++i) {
    REQUIRE(separate_gradients[i] == Approx(together_gradients[i]).margin(1e-6));
  }
  // Embedding rows of tokens no row uses (40..49, except none) get no gradient: nothing is padded in.
  for (std::int64_t token = 41; token < 50; ++token) {
    for (std::int64_t d = 0; d < 6; ++d) REQUIRE(together_gradients[static_cast<std::size_t>(token * 6 + d)] == 0.0f);
  }
  // A row without tokens has the zero mean: its logits are the bias, and nothing breaks.
  backend.zero_gradients();
  data.offsets = {0, 0, 41, 44};
  const StepResult with_empty = backend.forward_backward(data.input(0, 1));
  REQUIRE(std::isfinite(with_empty.loss_sum));
  REQUIRE(with_empty.loss_sum == Approx(std::log(2.0)));  // zero-initialised bias: uniform over 2 classes
}

TEST_CASE("a step counts its samples and right predictions per class, as predict() sees them", "[train][model]") {
  // The counts of predict()'s argmax against the labels, from the parameters before the step.
  auto check_step = [](Backend& backend, const BatchInput& input, int classes) {
    std::vector<std::int32_t> predictions(static_cast<std::size_t>(input.count));
    backend.predict(input, predictions.data());
    std::vector<std::int64_t> samples(static_cast<std::size_t>(classes), 0), correct(samples);
    for (std::int64_t i = 0; i < input.count; ++i) {
      const auto label = static_cast<std::size_t>(input.labels[i]);
      ++samples[label];
      correct[label] += predictions[static_cast<std::size_t>(i)] == input.labels[i] ? 1 : 0;
    }
    const StepResult result = backend.forward_backward(input);
    REQUIRE(result.samples_per_class == samples);
    REQUIRE(result.correct_per_class == correct);
    std::int64_t right = 0;
    for (const std::int64_t count : correct) right += count;
    REQUIRE(right == result.correct);
    backend.apply_sgd(0.05f, 0.0f);  // the next check sees other parameters
  };
  const FeatureData features = make_features(60, 5, 4, 21);
  for (const std::string kind : {"softmax", "mlp"}) {
    CAPTURE(kind);
    CpuBackend backend;
    backend.initialize(feature_config(kind, 5, 4));
    for (int step = 0; step < 3; ++step) check_step(backend, features.all(), 4);
  }
  // By hand: 3 rows of class 0 and one of class 2; classes 1 and 3 have no samples, so nothing right.
  FeatureData small = make_features(4, 5, 4, 1);
  small.labels = {0, 2, 0, 0};
  CpuBackend softmax;
  softmax.initialize(feature_config("softmax", 5, 4));
  const StepResult counted = softmax.forward_backward(small.all());
  REQUIRE(counted.samples_per_class == std::vector<std::int64_t>{3, 0, 1, 0});
  REQUIRE(counted.correct_per_class.size() == 4u);
  REQUIRE(counted.correct_per_class[1] == 0);
  REQUIRE(counted.correct_per_class[3] == 0);
  REQUIRE(counted.correct_per_class[0] + counted.correct_per_class[2] == counted.correct);
  softmax.zero_gradients();
  check_step(softmax, small.all(), 4);

  const SequenceData sequences = make_sequences(40, 64, 12, 4);
  CpuBackend bag;
  bag.initialize(bag_config(64));
  for (int step = 0; step < 3; ++step) check_step(bag, sequences.all(), 2);
  // An empty batch counts nothing, per class either.
  const StepResult empty = bag.forward_backward(sequences.input(0, 0));
  REQUIRE(empty.samples_per_class.empty());
  REQUIRE(empty.correct_per_class.empty());
}

TEST_CASE("token ids outside the vocabulary are hashed into range", "[train][model]") {
  CpuBackend backend;
  backend.initialize(bag_config(10, 3));
  const std::vector<std::int32_t> ids = {3, 13, -7};  // all map to bucket 3
  const std::vector<std::int64_t> offsets = {0, 1, 2, 3};
  const std::vector<std::int32_t> labels = {0, 0, 0};
  BatchInput input;
  input.samples = reinterpret_cast<const std::byte*>(ids.data());
  input.type = ElementType::int32;
  input.count = 3;
  input.labels = labels.data();
  input.offsets = offsets.data();
  const StepResult result = backend.forward_backward(input);
  REQUIRE(std::isfinite(result.loss_sum));
  const std::vector<float> gradients = backend.gradients();
  for (std::int64_t bucket = 0; bucket < 10; ++bucket) {
    const bool used = std::abs(gradients[static_cast<std::size_t>(bucket * 3)]) > 0.0f;
    REQUIRE(used == (bucket == 3));
  }
  // The negative id alone: bucket 3 too (-7 mod 10 taken non-negative), so the same loss per row as
  // the batch above, whose three rows are the same one-token row of label 0.
  backend.zero_gradients();
  BatchInput negative = input;
  negative.samples = reinterpret_cast<const std::byte*>(ids.data() + 2);
  negative.count = 1;
  negative.labels = labels.data() + 2;
  const StepResult alone = backend.forward_backward(negative);
  REQUIRE(alone.loss_sum == Approx(result.loss_sum / 3).epsilon(1e-6));
  const std::vector<float> alone_gradients = backend.gradients();
  for (std::int64_t bucket = 0; bucket < 10; ++bucket) {
    const bool used = std::abs(alone_gradients[static_cast<std::size_t>(bucket * 3)]) > 0.0f;
    REQUIRE(used == (bucket == 3));
  }
}

TEST_CASE("samples of any element type are converted to float", "[train][model]") {
  CpuBackend backend;
  backend.initialize(feature_config("mlp", 4, 2));
  const std::vector<std::uint8_t> bytes = {0, 1, 2, 250, 9, 8, 7, 6};
  const std::vector<double> doubles(bytes.begin(), bytes.end());
  const std::vector<std::int32_t> labels = {1, 0};
  BatchInput input;
  input.samples = reinterpret_cast<const std::byte*>(bytes.data());
  input.type = ElementType::uint8;
  input.count = 2;
  input.features = 4;
  input.labels = labels.data();
  const StepResult from_bytes = backend.forward_backward(input);
  const std::vector<float> byte_gradients = backend.gradients();
  backend.zero_gradients();
  input.samples = reinterpret_cast<const std::byte*>(doubles.data());
  input.type = ElementType::float64;
  const StepResult from_doubles = backend.forward_backward(input);
  REQUIRE(from_bytes.loss_sum == from_doubles.loss_sum);
  REQUIRE(byte_gradients == backend.gradients());
}

TEST_CASE("bad batches are refused before the gradients change", "[train][model]") {
  CpuBackend backend;
  REQUIRE_THROWS_AS(backend.forward_backward(BatchInput{}), UsageError);  // not initialized
  backend.initialize(feature_config("softmax", 3, 2));
  const std::vector<float> samples = {1, 2, 3, 4, 5, 6};
  std::vector<std::int32_t> labels = {0, 2};
  BatchInput input{
      reinterpret_cast<const std::byte*>(samples.data()), ElementType::float32, 2, 3, labels.data(), nullptr};
  try {
    backend.forward_backward(input);
    FAIL("no error");
  } catch (const DataError& error) {
    REQUIRE(error.reason() == "label 2 of batch row 1 is outside 0..1 (the model has 2 classes)");
  }
  for (float gradient : backend.gradients()) REQUIRE(gradient == 0.0f);
  input.features = 4;
  REQUIRE_THROWS_AS(backend.forward_backward(input), UsageError);  // wrong feature count
  input.features = 3;
  input.labels = nullptr;
  REQUIRE_THROWS_AS(backend.forward_backward(input), UsageError);  // training needs labels
  std::vector<std::int32_t> predictions(2, -1);
  backend.predict(input, predictions.data());  // prediction does not
  REQUIRE(predictions[0] >= 0);
  // An empty batch adds nothing.
  input.count = 0;
  const StepResult empty = backend.forward_backward(input);
  REQUIRE(empty.count == 0);
  REQUIRE(empty.loss_sum == 0.0);
}

TEST_CASE("model configs: resolution, layout, deterministic initialisation, text form", "[train][model]") {
  DatasetInfo features;
  features.path = "f.h5";
  features.sample_shape = {3, 4};
  DatasetInfo sequences;
  sequences.path = "s.h5";
  sequences.variable_length = true;
  sequences.element_type = ElementType::uint8;

  ModelConfig config;
  const ModelConfig mlp = resolve_model_config(config, features);
  REQUIRE(mlp.kind == "mlp");
  REQUIRE(mlp.features == 12);
  const ModelConfig bag = resolve_model_config(config, sequences);
  REQUIRE(bag.kind == "bag");
  REQUIRE(bag.vocab == 256);
  sequences.element_type = ElementType::int32;
  REQUIRE(resolve_model_config(config, sequences).vocab == 65536);
  config.kind = "bag";
  REQUIRE_THROWS_AS(resolve_model_config(config, features), UsageError);
  config.kind = "softmax";
  REQUIRE_THROWS_AS(resolve_model_config(config, sequences), UsageError);
  config.features = 13;
  REQUIRE_THROWS_AS(resolve_model_config(config, features), UsageError);
  config.kind = "tree";
  REQUIRE_THROWS_AS(validate_model_config(config), UsageError);
  sequences.element_type = ElementType::float32;
  REQUIRE_THROWS_AS(resolve_model_config(ModelConfig{}, sequences), UsageError);

  const auto layout = parameter_layout(mlp);
  REQUIRE(layout.size() == 4);
  REQUIRE(layout[2].name == "W2");
  REQUIRE(layout[2].offset == 12 * 64 + 64);
  REQUIRE(parameter_count(mlp) == 12 * 64 + 64 + 64 * 2 + 2);

  // Same config and seed: the same parameters; another seed: others. Biases start at zero.
  const std::vector<float> first = initial_parameters(mlp);
  REQUIRE(first == initial_parameters(mlp));
  ModelConfig reseeded = mlp;
  reseeded.seed = 1;
  REQUIRE(first != initial_parameters(reseeded));
  for (std::int64_t j = 0; j < 64; ++j) REQUIRE(first[static_cast<std::size_t>(layout[1].offset + j)] == 0.0f);
  const float limit = static_cast<float>(std::sqrt(6.0 / 12.0));
  for (std::int64_t i = 0; i < 12 * 64; ++i) REQUIRE(std::abs(first[static_cast<std::size_t>(i)]) <= limit);

  REQUIRE(model_config_text(mlp) == "kind=mlp features=12 hidden=64 num_classes=2 vocab=0 embed_dim=32 seed=0");
  REQUIRE(model_config_text(parse_model_config_text(model_config_text(bag))) == model_config_text(bag));
  REQUIRE_THROWS_AS(parse_model_config_text("kind=mlp features=x"), DataError);
}

TEST_CASE("SGD with momentum follows PyTorch's update and exposes its state", "[train][model]") {
  CpuBackend backend;
  backend.initialize(feature_config("softmax", 2, 2));
  const std::vector<float> samples = {1.0f, -2.0f};
  const std::vector<std::int32_t> labels = {1};
  const BatchInput input{
      reinterpret_cast<const std::byte*>(samples.data()), ElementType::float32, 1, 2, labels.data(), nullptr};
  const std::vector<float> start = backend.parameters();
  backend.forward_backward(input);
  const std::vector<float> gradient = backend.gradients();
  backend.apply_sgd(0.1f, 0.9f);
  for (float value : backend.gradients()) REQUIRE(value == 0.0f);  // zeroed by the step
  const std::vector<float> velocity = backend.optimizer_state();
  REQUIRE(velocity == gradient);  // first step: velocity = gradient
  for (std::size_t i = 0; i < start.size(); ++i) REQUIRE(backend.parameters()[i] == start[i] - 0.1f * gradient[i]);

  // Restoring parameters and momentum reproduces the next step exactly.
  CpuBackend copy;
  copy.initialize(backend.config());
  copy.set_parameters(backend.parameters());
  copy.set_optimizer_state(backend.optimizer_state());
  backend.forward_backward(input);
  backend.apply_sgd(0.1f, 0.9f);
  copy.forward_backward(input);
  copy.apply_sgd(0.1f, 0.9f);
  REQUIRE(copy.parameters() == backend.parameters());
  REQUIRE_THROWS_AS(copy.set_optimizer_state({1.0f}), UsageError);
  REQUIRE_THROWS_AS(copy.set_parameters({1.0f}), UsageError);
}

TEST_CASE("momentum accumulates over steps: v = m*v + g, p -= lr*v", "[train][model]") {
  const std::vector<float> samples = {1.0f, -2.0f, 0.5f, 3.0f};
  const std::vector<std::int32_t> labels = {1, 0};
  const BatchInput input{
      reinterpret_cast<const std::byte*>(samples.data()), ElementType::float32, 2, 2, labels.data(), nullptr};
  const float momentum = 0.9f;

  SECTION("a constant gradient (learning rate 0): v_t = g * (1 - m^t) / (1 - m)") {
    CpuBackend backend;
    backend.initialize(feature_config("softmax", 2, 2));
    const std::vector<float> start = backend.parameters();
    backend.forward_backward(input);
    const std::vector<float> gradient = backend.gradients();
    REQUIRE(max_abs_value(gradient) > 0.1);  // the check below is not vacuous
    for (int step = 1; step <= 6; ++step) {
      if (step > 1) backend.forward_backward(input);  // the same parameters: the same gradient
      backend.apply_sgd(0.0f, momentum);
      const double geometric = (1.0 - std::pow(static_cast<double>(momentum), step)) / (1.0 - momentum);
      const std::vector<float> velocity = backend.optimizer_state();
      for (std::size_t i = 0; i < gradient.size(); ++i) {
        CAPTURE(step, i, gradient[i], velocity[i], geometric);
        REQUIRE(velocity[i] == Approx(gradient[i] * geometric).epsilon(1e-5).margin(1e-7));
      }
      REQUIRE(backend.parameters() == start);
    }
  }

  SECTION("a changing gradient (learning rate 0.1): the update tracked step by step in the test") {
    CpuBackend backend;
    backend.initialize(feature_config("softmax", 2, 2));
    const std::vector<float> start = backend.parameters();
    std::vector<double> parameters(start.begin(), start.end());
    std::vector<double> velocity(parameters.size(), 0.0);
    const double learning_rate = 0.1;
    double largest_gap = 0.0;  // largest |velocity - gradient|: where momentum differs from plain SGD
    for (int step = 1; step <= 6; ++step) {
      backend.forward_backward(input);
      const std::vector<float> gradient = backend.gradients();
      for (std::size_t i = 0; i < parameters.size(); ++i) {
        velocity[i] = momentum * velocity[i] + gradient[i];
        parameters[i] -= learning_rate * velocity[i];
        largest_gap = std::max(largest_gap, std::abs(velocity[i] - gradient[i]));
      }
      backend.apply_sgd(static_cast<float>(learning_rate), momentum);
      const std::vector<float> state = backend.optimizer_state(), now = backend.parameters();
      for (std::size_t i = 0; i < parameters.size(); ++i) {
        CAPTURE(step, i);
        REQUIRE(state[i] == Approx(velocity[i]).epsilon(1e-5).margin(1e-6));
        REQUIRE(now[i] == Approx(parameters[i]).epsilon(1e-5).margin(1e-6));
      }
    }
    REQUIRE(largest_gap > 0.1);  // momentum made a difference the check can see
  }
}

TEST_CASE("ReLU keeps NaN: a NaN sample makes the mlp's loss NaN instead of clamping it away", "[train][model]") {
  // relu(NaN) must be NaN: were it 0 (as fmaxf(NaN, 0) is), every hidden unit fed by the NaN feature
  // would read as "off", the logits would be the output bias alone and the loss finite.
  CHECK(std::isnan(detail::relu(std::nanf(""))));
  CHECK(detail::relu(-2.5f) == 0.0f);
  CHECK(detail::relu(3.0f) == 3.0f);
  CHECK(detail::relu_passes_gradient(std::nanf("")));
  CHECK_FALSE(detail::relu_passes_gradient(0.0f));
  CHECK_FALSE(detail::relu_passes_gradient(-1.0f));
  CHECK(detail::relu_passes_gradient(0.5f));

  CpuBackend backend;
  backend.initialize(feature_config("mlp", 4, 3));
  FeatureData data = make_features(6, 4, 3, 17);
  const StepResult clean = backend.forward_backward(data.all());
  REQUIRE(std::isfinite(clean.loss_sum));
  backend.zero_gradients();
  data.samples[2 * 4 + 1] = std::nanf("");  // row 2, feature 1
  const StepResult poisoned = backend.forward_backward(data.all());
  CHECK(std::isnan(poisoned.loss_sum));
  const std::vector<float> gradients = backend.gradients();
  CHECK(std::any_of(gradients.begin(), gradients.end(), [](float g) { return std::isnan(g); }));
  // Without the NaN row the rest of the batch is finite again.
  backend.zero_gradients();
  CHECK(std::isfinite(backend.forward_backward(data.input(3, 3)).loss_sum));
}
