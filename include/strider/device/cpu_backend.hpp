#pragma once
/// \file
/// The CPU backend: parameters, gradients and momentum in host memory, the models computed on the
/// calling thread, gradients all-reduced with MPI (Communicator::all_reduce, one call per step).
/// Deterministic: the same batch gives bit-identical results on every rank and run.

#include <memory>

#include "strider/device/backend.hpp"

namespace strider {

namespace detail {
class CpuModel;
}

/// The reference backend. Used by one thread at a time.
class CpuBackend final : public Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  std::string name() const override { return "cpu"; }
  void initialize(const ModelConfig& config) override;
  const ModelConfig& config() const override { return config_; }
  std::int64_t parameter_count() const override { return static_cast<std::int64_t>(parameters_.size()); }
  /// Nothing to connect: gradients go through comm's all_reduce. Returns at once.
  void connect(const Communicator& comm) override { (void)comm; }
  /// Page-aligned host memory (make_page_aligned_allocator).
  std::shared_ptr<HostAllocator> host_allocator() const override;
  /// false: batches are read where they lie, nothing is copied.
  bool overlaps_copies() const override { return false; }
  std::vector<float> parameters() const override { return parameters_; }
  void set_parameters(const std::vector<float>& parameters) override;
  std::vector<float> gradients() const override { return gradients_; }
  void zero_gradients() override;
  StepResult forward_backward(const BatchInput& input) override;
  /// Collective over comm: every rank must call.
  void all_reduce_gradients(const Communicator& comm, std::int64_t global_count) override;
  void scale_gradients(std::int64_t count) override;
  void apply_sgd(float learning_rate, float momentum) override;
  std::vector<float> optimizer_state() const override { return velocity_; }
  void set_optimizer_state(const std::vector<float>& state) override;
  void predict(const BatchInput& input, std::int32_t* predictions) override;

 private:
  void require_initialized(const char* what) const;

  ModelConfig config_;
  std::unique_ptr<detail::CpuModel> model_;
  std::vector<float> parameters_;
  std::vector<float> gradients_;
  std::vector<float> velocity_;
};

}  // namespace strider
