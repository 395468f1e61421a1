// Softmax regression, the two-layer MLP and the bag of embeddings, one sample at a time on the host.
// Sums run in a fixed order, so results are bit-identical for the same batch on every rank.
#include "device/cpu/cpu_models.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "device/activation.hpp"
#include "device/batch_checks.hpp"
#include "device/element_values.hpp"
#include "strider/core/error.hpp"
#include "strider/device/element_conversion.hpp"

namespace strider::detail {
namespace {

// Cross-entropy of one row of logits: returns the loss (natural log), writes d loss / d logits
// (softmax - one-hot) and whether the argmax (lowest index on ties) is the label.
double cross_entropy(const float* logits, int classes, int label, float* logit_gradients, bool* correct) {
  int best = 0;
  for (int c = 1; c < classes; ++c) {
    if (logits[c] > logits[best]) best = c;
  }
  const double largest = logits[best];
  double total = 0.0;
  for (int c = 0; c < classes; ++c) total += std::exp(static_cast<double>(logits[c]) - largest);
  const double log_total = std::log(total);
  for (int c = 0; c < classes; ++c) {
    const double probability = std::exp(static_cast<double>(logits[c]) - largest - log_total);
    logit_gradients[c] = static_cast<float>(probability - (c == label ? 1.0 : 0.0));
  }
  *correct = best == label;
  return largest + log_total - static_cast<double>(logits[label]);
}

int argmax(const float* logits, int classes) {
  int best = 0;
  for (int c = 1; c < classes; ++c) {
    if (logits[c] > logits[best]) best = c;
  }
  return best;
}

// out[cols] = bias + in[rows] * weights[rows, cols]
void affine(const float* in, std::int64_t rows, const float* weights, const float* bias, std::int64_t cols,
            float* out) {
  std::copy(bias, bias + cols, out);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float value = in[r];
    if (value == 0.0f) continue;
    const float* row = weights + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) out[c] += value * row[c];
  }
}

// Backward of affine: weight_gradients += in (x) out_gradients, bias_gradients += out_gradients, and
// (when in_gradients is not null) in_gradients = weights * out_gradients.
void affine_backward(const float* in, std::int64_t rows, const float* weights, const float* out_gradients,
                     std::int64_t cols, float* weight_gradients, float* bias_gradients, float* in_gradients) {
  for (std::int64_t c = 0; c < cols; ++c) bias_gradients[c] += out_gradients[c];
  for (std::int64_t r = 0; r < rows; ++r) {
    const float value = in[r];
    float* gradient_row = weight_gradients + r * cols;
    const float* row = weights + r * cols;
    if (value != 0.0f) {
      for (std::int64_t c = 0; c < cols; ++c) gradient_row[c] += value * out_gradients[c];
    }
    if (in_gradients != nullptr) {
      float sum = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c) sum += row[c] * out_gradients[c];
      in_gradients[r] = sum;
    }
  }
}

void check_labels(const BatchInput& input, int classes) {
  if (input.count > 0 && input.labels == nullptr) {
    STRIDER_THROW(UsageError, "training needs labels, but the batch has none (does the file have a labels dataset?)");
  }
  for (std::int64_t i = 0; i < input.count; ++i) {
    const std::int32_t label = input.labels[i];
    if (label < 0 || label >= classes) {
      STRIDER_THROW(DataError, "label " + std::to_string(label) + " of batch row " + std::to_string(i) +
                                   " is outside 0.." + std::to_string(classes - 1) + " (the model has " +
                                   std::to_string(classes) + " classes)");
    }
  }
}

// The per-row loop every model shares: check the batch, then per row forward, loss, backward.
// Rows are independent, so a row's result never depends on the other rows of its batch.
class RowModel : public CpuModel {
 public:
  explicit RowModel(int classes)
      : classes_(classes),
        logits_(static_cast<std::size_t>(classes)),
        logit_gradients_(static_cast<std::size_t>(classes)) {}

  StepResult forward_backward(const float* parameters, float* gradients, const BatchInput& input) override {
    check_input(input);
    check_labels(input, classes_);
    StepResult result;
    if (input.count == 0) return result;
    result.samples_per_class.assign(static_cast<std::size_t>(classes_), 0);
    result.correct_per_class.assign(static_cast<std::size_t>(classes_), 0);
    for (std::int64_t i = 0; i < input.count; ++i) {
      forward(parameters, input, i);
      bool correct = false;
      const auto label = static_cast<std::size_t>(input.labels[i]);
      result.loss_sum += cross_entropy(logits_.data(), classes_, input.labels[i], logit_gradients_.data(), &correct);
      result.correct += correct ? 1 : 0;
      ++result.samples_per_class[label];
      result.correct_per_class[label] += correct ? 1 : 0;
      backward(parameters, gradients, input, i);
    }
    result.count = input.count;
    return result;
  }

  void predict(const float* parameters, const BatchInput& input, std::int32_t* predictions) override {
    check_input(input);
    for (std::int64_t i = 0; i < input.count; ++i) {
      forward(parameters, input, i);
      predictions[i] = argmax(logits_.data(), classes_);
    }
  }

 protected:
  /// Throws UsageError / DataError for a batch this model cannot read.
  virtual void check_input(const BatchInput& input) const = 0;
  /// Sets logits_ for row i.
  virtual void forward(const float* parameters, const BatchInput& input, std::int64_t i) = 0;
  /// Adds row i's gradients (logit_gradients_ set, forward just ran on row i) to gradients.
  virtual void backward(const float* parameters, float* gradients, const BatchInput& input, std::int64_t i) = 0;

  int classes_;
  std::vector<float> logits_;
  std::vector<float> logit_gradients_;
};

// Shared by softmax and mlp: fixed-size samples, row i converted to floats into row_.
class FeatureModel : public RowModel {
 public:
  explicit FeatureModel(const ModelConfig& config)
      : RowModel(config.num_classes),
        features_(config.features),
        normalization_(config.normalization),
        row_(static_cast<std::size_t>(features_)) {}

 protected:
  void check_input(const BatchInput& input) const override { check_feature_batch(input, features_); }
  void load_row(const BatchInput& input, std::int64_t i) {
    if (!conversion_ || conversion_->input_type() != input.type) {
      conversion_.emplace(input.type, features_, ConversionOptions{ElementType::float32, normalization_});
    }
    const auto row_bytes = static_cast<std::int64_t>(element_bytes(input.type)) * features_;
    conversion_->convert(input.samples + i * row_bytes, 1, reinterpret_cast<std::byte*>(row_.data()));
  }

  std::int64_t features_;
  std::optional<Normalization> normalization_;  ///< of the inputs, as they are converted
  std::vector<float> row_;
  std::optional<ElementConversion> conversion_;  ///< to float32 (normalized), for the last batch's element type
};

class SoftmaxModel final : public FeatureModel {
 public:
  using FeatureModel::FeatureModel;

 private:
  void forward(const float* parameters, const BatchInput& input, std::int64_t i) override {
    load_row(input, i);
    affine(row_.data(), features_, parameters, parameters + features_ * classes_, classes_, logits_.data());
  }
  void backward(const float* parameters, float* gradients, const BatchInput&, std::int64_t) override {
    affine_backward(row_.data(), features_, parameters, logit_gradients_.data(), classes_, gradients,
                    gradients + features_ * classes_, nullptr);
  }
};

class MlpModel final : public FeatureModel {
 public:
  explicit MlpModel(const ModelConfig& config)
      : FeatureModel(config),
        hidden_(config.hidden),
        activations_(static_cast<std::size_t>(hidden_)),
        hidden_gradients_(static_cast<std::size_t>(hidden_)) {}

 private:
  // Offsets of W1, b1, W2, b2 in the flat vector.
  std::int64_t w1() const { return 0; }
  std::int64_t b1() const { return features_ * hidden_; }
  std::int64_t w2() const { return b1() + hidden_; }
  std::int64_t b2() const { return w2() + hidden_ * classes_; }

  void forward(const float* parameters, const BatchInput& input, std::int64_t i) override {
    load_row(input, i);
    affine(row_.data(), features_, parameters + w1(), parameters + b1(), hidden_, activations_.data());
    for (float& value : activations_) value = relu(value);
    affine(activations_.data(), hidden_, parameters + w2(), parameters + b2(), classes_, logits_.data());
  }
  void backward(const float* parameters, float* gradients, const BatchInput&, std::int64_t) override {
    affine_backward(activations_.data(), hidden_, parameters + w2(), logit_gradients_.data(), classes_,
                    gradients + w2(), gradients + b2(), hidden_gradients_.data());
    // ReLU: no gradient where the unit was off (activation 0, i.e. pre-activation <= 0).
    for (std::int64_t j = 0; j < hidden_; ++j) {
      if (!relu_passes_gradient(activations_[static_cast<std::size_t>(j)]))
        hidden_gradients_[static_cast<std::size_t>(j)] = 0.0f;
    }
    affine_backward(row_.data(), features_, parameters + w1(), hidden_gradients_.data(), hidden_, gradients + w1(),
                    gradients + b1(), nullptr);
  }

  std::int64_t hidden_;
  std::vector<float> activations_;
  std::vector<float> hidden_gradients_;
};

// Bag of embeddings: each row's mean embedding over its own tokens only (the padding that a padded
// batch would add is never read, so it cannot count), then a linear layer.
class BagModel final : public RowModel {
 public:
  explicit BagModel(const ModelConfig& config)
      : RowModel(config.num_classes),
        vocab_(config.vocab),
        width_(config.embed_dim),
        mean_(static_cast<std::size_t>(width_)),
        mean_gradients_(static_cast<std::size_t>(width_)) {}

 private:
  std::int64_t w() const { return vocab_ * width_; }
  std::int64_t b() const { return w() + width_ * classes_; }

  std::pair<std::int64_t, std::int64_t> row_range(const BatchInput& input, std::int64_t i) const {
    return {input.offsets[i] - input.offsets[0], input.offsets[i + 1] - input.offsets[0]};
  }

  template <typename Body>
  void for_each_token(const BatchInput& input, std::int64_t first, std::int64_t end, Body&& body) const {
    with_element_type(input.type, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T>) {
        for (std::int64_t t = first; t < end; ++t) body(token_bucket(load_element<T>(input.samples, t), vocab_));
      }
    });
  }

  void forward(const float* parameters, const BatchInput& input, std::int64_t i) override {
    std::fill(mean_.begin(), mean_.end(), 0.0f);
    const auto [first, end] = row_range(input, i);
    for_each_token(input, first, end, [&](std::int64_t bucket) {
      const float* embedding = parameters + bucket * width_;
      for (std::int64_t d = 0; d < width_; ++d) mean_[static_cast<std::size_t>(d)] += embedding[d];
    });
    if (end > first) {
      const float share = 1.0f / static_cast<float>(end - first);
      for (float& value : mean_) value *= share;
    }
    affine(mean_.data(), width_, parameters + w(), parameters + b(), classes_, logits_.data());
  }

  void backward(const float* parameters, float* gradients, const BatchInput& input, std::int64_t i) override {
    affine_backward(mean_.data(), width_, parameters + w(), logit_gradients_.data(), classes_, gradients + w(),
                    gradients + b(), mean_gradients_.data());
    const auto [first, end] = row_range(input, i);
    if (end == first) return;
    const float share = 1.0f / static_cast<float>(end - first);
    for (float& value : mean_gradients_) value *= share;
    for_each_token(input, first, end, [&](std::int64_t bucket) {
      float* embedding_gradient = gradients + bucket * width_;
      for (std::int64_t d = 0; d < width_; ++d) embedding_gradient[d] += mean_gradients_[static_cast<std::size_t>(d)];
    });
  }

  void check_input(const BatchInput& input) const override { check_token_batch(input); }

  std::int64_t vocab_;
  std::int64_t width_;
  std::vector<float> mean_;
  std::vector<float> mean_gradients_;
};

}  // namespace

std::unique_ptr<CpuModel> make_cpu_model(const ModelConfig& config) {
  validate_model_config(config);
  if (config.kind == "softmax") return std::make_unique<SoftmaxModel>(config);
  if (config.kind == "mlp") return std::make_unique<MlpModel>(config);
  return std::make_unique<BagModel>(config);
}

}  // namespace strider::detail
