#pragma once
// The models' math on the host (internal): the CPU backend's engine and the reference the CUDA
// backend is tested against.

#include <cstdint>
#include <memory>

#include "strider/device/batch_input.hpp"
#include "strider/device/model.hpp"

namespace strider::detail {

/// One model's forward and backward pass over flat parameter and gradient vectors
/// (parameter_layout). Stateless apart from scratch buffers: one thread at a time.
class CpuModel {
 public:
  virtual ~CpuModel() = default;
  /// Adds the gradients of the summed cross-entropy of the batch to `gradients`; returns the sums.
  /// Checks labels (and offsets) before touching `gradients`.
  virtual StepResult forward_backward(const float* parameters, float* gradients, const BatchInput& input) = 0;
  /// Argmax class per sample.
  virtual void predict(const float* parameters, const BatchInput& input, std::int32_t* predictions) = 0;
};

/// The model of a resolved config. Throws UsageError for an invalid config.
std::unique_ptr<CpuModel> make_cpu_model(const ModelConfig& config);

}  // namespace strider::detail
