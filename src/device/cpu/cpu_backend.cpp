// The CPU backend: host vectors, the models of cpu_models.cpp, gradients all-reduced over MPI.
#include "strider/device/cpu_backend.hpp"

#include <algorithm>

#include "device/cpu/cpu_models.hpp"
#include "strider/core/error.hpp"

namespace strider {

CpuBackend::CpuBackend() = default;
CpuBackend::~CpuBackend() = default;

void CpuBackend::require_initialized(const char* what) const {
  if (model_ == nullptr) STRIDER_THROW(UsageError, std::string("CpuBackend::") + what + " called before initialize()");
}

void CpuBackend::initialize(const ModelConfig& config) {
  model_ = detail::make_cpu_model(config);  // validates
  config_ = config;
  parameters_ = initial_parameters(config);
  gradients_.assign(parameters_.size(), 0.0f);
  velocity_.assign(parameters_.size(), 0.0f);
}

void CpuBackend::set_parameters(const std::vector<float>& parameters) {
  require_initialized("set_parameters");
  STRIDER_REQUIRE(parameters.size() == parameters_.size(), "set_parameters: expected " +
                                                               std::to_string(parameters_.size()) +
                                                               " parameters, got " + std::to_string(parameters.size()));
  parameters_ = parameters;
}

std::shared_ptr<HostAllocator> CpuBackend::host_allocator() const {
  return make_page_aligned_allocator();
}

void CpuBackend::zero_gradients() {
  std::fill(gradients_.begin(), gradients_.end(), 0.0f);
}

StepResult CpuBackend::forward_backward(const BatchInput& input) {
  require_initialized("forward_backward");
  return model_->forward_backward(parameters_.data(), gradients_.data(), input);
}

void CpuBackend::all_reduce_gradients(const Communicator& comm, std::int64_t global_count) {
  require_initialized("all_reduce_gradients");
  comm.all_reduce(gradients_.data(), static_cast<std::int64_t>(gradients_.size()), ReduceOp::sum);
  scale_gradients(global_count);
}

void CpuBackend::scale_gradients(std::int64_t count) {
  STRIDER_REQUIRE(count >= 0, "scale_gradients: negative sample count " + std::to_string(count));
  if (count == 0) return;
  const float scale = 1.0f / static_cast<float>(count);
  for (float& gradient : gradients_) gradient *= scale;
}

void CpuBackend::apply_sgd(float learning_rate, float momentum) {
  require_initialized("apply_sgd");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    velocity_[i] = momentum * velocity_[i] + gradients_[i];
    parameters_[i] -= learning_rate * velocity_[i];
  }
  zero_gradients();
}

void CpuBackend::set_optimizer_state(const std::vector<float>& state) {
  require_initialized("set_optimizer_state");
  STRIDER_REQUIRE(state.size() == velocity_.size(), "set_optimizer_state: expected " +
                                                        std::to_string(velocity_.size()) + " values, got " +
                                                        std::to_string(state.size()));
  velocity_ = state;
}

void CpuBackend::predict(const BatchInput& input, std::int32_t* predictions) {
  require_initialized("predict");
  model_->predict(parameters_.data(), input, predictions);
}

}  // namespace strider
