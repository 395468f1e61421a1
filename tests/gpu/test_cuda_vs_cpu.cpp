// The CUDA backend against the CPU backend (the reference math) on the same batches: losses,
// correct counts (per class too), gradients, parameters and momentum after SGD steps, predictions,
// for softmax, mlp and bag with several element types and the dense layers on cuBLAS and on
// strider's kernels, batches small and large (a narrow layer's gradients then run in chunks), and
// every grid-stride loop run more than once; NaN reaches the loss on both; bad batches are refused
// before the gradients change; a staged copy is never used once its memory may hold another batch.
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "device/cuda/kernel_limits.hpp"
#include "gpu_test_support.hpp"
#include "scoped_variable.hpp"
#include "strider/core/error.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/device/cuda_backend.hpp"

using namespace strider;
using namespace strider::gpu_testing;

namespace {

// Per element: fp32 sums in another order (and fused multiply-adds on the GPU) differ by a few ulps
// per term, relative to the value: 2e-4 relative. Where terms cancel, the value can be small while
// the rounding is that of the terms: an absolute floor of 4 ulps per summed term, at the scale of
// the largest entry (a bound on the terms' size); `terms` is the longest sum (the batch's rows).
void check_close(const std::vector<float>& cuda, const std::vector<float>& cpu, std::int64_t terms,
                 const std::string& what) {
  const double absolute = 4.0 * static_cast<double>(terms) * FLT_EPSILON * max_abs(cpu);
  const ElementwiseComparison comparison = compare_per_element(cuda, cpu, 2e-4, absolute);
  INFO(what << ": " << comparison);
  CHECK(comparison.outside == 0);
}

/// Launches at most `blocks` blocks per kernel while it lives.
struct BlockLimit {
  explicit BlockLimit(std::int64_t blocks) { detail::kernels::limit_blocks_for_testing(blocks); }
  ~BlockLimit() { detail::kernels::limit_blocks_for_testing(0); }
  BlockLimit(const BlockLimit&) = delete;
  BlockLimit& operator=(const BlockLimit&) = delete;
};

struct Case {
  std::string name;
  ModelConfig config;
  std::vector<PinnedBatch> batches;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  auto features_case = [&](const std::string& kind, ElementType type, std::int64_t features, int classes) {
    Case c;
    c.name = kind + " on " + element_name(type) + " features";
    c.config.kind = kind;
    c.config.features = features;
    c.config.hidden = 48;
    c.config.num_classes = classes;
    c.config.seed = 11;
    for (int b = 0; b < 4; ++b) c.batches.push_back(make_feature_batch(64 + 7 * b, features, type, classes, 100 + b));
    all.push_back(std::move(c));
  };
  features_case("softmax", ElementType::float32, 37, 5);
  {
    // 3000 rows through a narrow softmax layer (4 x 3 + 3 outputs): its gradients run in chunks.
    Case c;
    c.name = "softmax on 3000 rows of 4 float32 features";
    c.config.kind = "softmax";
    c.config.features = 4;
    c.config.num_classes = 3;
    c.config.seed = 13;
    for (int b = 0; b < 3; ++b)
      c.batches.push_back(make_feature_batch(3000 - 101 * b, 4, ElementType::float32, 3, 50 + b));
    all.push_back(std::move(c));
  }
  features_case("softmax", ElementType::uint8, 16, 3);
  features_case("mlp", ElementType::float32, 37, 5);
  features_case("mlp", ElementType::int16, 20, 4);
  features_case("mlp", ElementType::float64, 9, 2);
  auto bag_case = [&](ElementType type, std::int64_t vocab) {
    Case c;
    c.name = std::string("bag on ") + element_name(type) + " tokens";
    c.config.kind = "bag";
    c.config.vocab = vocab;
    c.config.embed_dim = 24;
    c.config.num_classes = 4;
    c.config.seed = 5;
    for (int b = 0; b < 4; ++b)
      c.batches.push_back(make_token_batch(50 + 3 * b, type, 4, vocab, 12, 1000 * b, 200 + b));
    all.push_back(std::move(c));
  };
  bag_case(ElementType::uint8, 64);
  bag_case(ElementType::int32, 97);
  bag_case(ElementType::int64, 50);
  return all;
}

/// Trains both backends on the case's batches and compares everything they expose.
void compare_on(Case& c) {
  CpuBackend cpu;
  const auto cuda = make_cuda_backend(world(), true);
  cpu.initialize(c.config);
  cuda->initialize(c.config);
  CHECK(cuda->name() == "cuda");
  CHECK(cuda->parameter_count() == cpu.parameter_count());
  CHECK(cuda->parameters() == initial_parameters(c.config));  // exact: the same initial vector

  for (std::size_t k = 0; k < c.batches.size(); ++k) {
    const BatchInput& input = c.batches[k].input;
    if (k + 1 < c.batches.size()) cuda->stage(c.batches[k + 1].input);
    const StepResult on_gpu = cuda->forward_backward(input);
    const StepResult on_cpu = cpu.forward_backward(input);
    INFO(c.name << ", batch " << k);
    CHECK(on_gpu.count == on_cpu.count);
    CHECK(on_gpu.loss_sum == Approx(on_cpu.loss_sum).epsilon(1e-5).margin(1e-4));
    CHECK(std::llabs(on_gpu.correct - on_cpu.correct) <= 1);  // a near-tie may round either way
    // Per class: the same samples, right predictions within the same near-tie, summing to `correct`.
    CHECK(on_gpu.samples_per_class == on_cpu.samples_per_class);
    CHECK(on_gpu.correct_per_class.size() == static_cast<std::size_t>(c.config.num_classes));
    std::int64_t gpu_right = 0, differing = 0;
    for (std::size_t cls = 0; cls < on_gpu.correct_per_class.size() && cls < on_cpu.correct_per_class.size(); ++cls) {
      gpu_right += on_gpu.correct_per_class[cls];
      differing += std::llabs(on_gpu.correct_per_class[cls] - on_cpu.correct_per_class[cls]);
    }
    CHECK(gpu_right == on_gpu.correct);
    CHECK(differing <= 1);
    check_close(cuda->gradients(), cpu.gradients(), input.count, "summed gradients");
    cuda->scale_gradients(input.count);
    cpu.scale_gradients(input.count);
    check_close(cuda->gradients(), cpu.gradients(), input.count, "mean gradients");
    cuda->apply_sgd(0.1f, 0.9f);
    cpu.apply_sgd(0.1f, 0.9f);
    CHECK(max_abs(cuda->gradients()) == 0.0);  // apply_sgd leaves them zero
  }
  const std::int64_t rows = c.batches.front().input.count;
  check_close(cuda->parameters(), cpu.parameters(), rows, "parameters after SGD");
  check_close(cuda->optimizer_state(), cpu.optimizer_state(), rows, "momentum after SGD");

  const BatchInput& last = c.batches.back().input;
  std::vector<std::int32_t> gpu_predictions(static_cast<std::size_t>(last.count));
  std::vector<std::int32_t> cpu_predictions(static_cast<std::size_t>(last.count));
  cuda->predict(last, gpu_predictions.data());
  cpu.predict(last, cpu_predictions.data());
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < gpu_predictions.size(); ++i) differ += gpu_predictions[i] != cpu_predictions[i];
  CHECK(differ <= 1);

  // Parameters and momentum move between backends (checkpoints).
  cuda->set_parameters(cpu.parameters());
  cuda->set_optimizer_state(cpu.optimizer_state());
  CHECK(cuda->parameters() == cpu.parameters());
  CHECK(cuda->optimizer_state() == cpu.optimizer_state());
}

}  // namespace

TEST_CASE("the CUDA backend computes what the CPU backend computes", "[cuda-vs-cpu]") {
  // Both implementations of the dense layers: cuBLAS (the default) and strider's kernels.
  for (const char* dense : {"cublas", "kernels"}) {
    for (Case& c : cases()) {
      SECTION(std::string(dense) + ": " + c.name) {
        const strider::testing::ScopedVariable choice("STRIDER_CUDA_DENSE", dense);
        compare_on(c);
      }
    }
  }
}

TEST_CASE("every grid-stride loop runs more than once and still computes the same", "[cuda-vs-cpu]") {
  // With one block of 256 threads per launch, every kernel whose work exceeds 256 elements strides
  // (strider's dense kernels, and cuBLAS's bias, mask and fill kernels).
  const BlockLimit one_block(1);
  for (const char* dense : {"cublas", "kernels"}) {
    for (Case& c : cases()) {
      if (c.name != "mlp on float32 features" && c.name != "bag on int32 tokens" &&
          c.name != "softmax on 3000 rows of 4 float32 features")
        continue;
      SECTION(std::string(dense) + ": " + c.name) {
        const strider::testing::ScopedVariable choice("STRIDER_CUDA_DENSE", dense);
        compare_on(c);
      }
    }
  }
}

TEST_CASE("a NaN sample makes the loss NaN on the GPU as on the CPU", "[cuda-vs-cpu]") {
  ModelConfig config;
  config.kind = "mlp";
  config.features = 6;
  config.hidden = 16;
  config.num_classes = 3;
  config.seed = 4;
  CpuBackend cpu;
  const auto cuda = make_cuda_backend(world(), true);
  cpu.initialize(config);
  cuda->initialize(config);
  PinnedBatch batch = make_feature_batch(40, 6, ElementType::float32, 3, 77);
  reinterpret_cast<float*>(batch.samples.data())[7 * 6 + 2] = std::nanf("");
  const StepResult on_gpu = cuda->forward_backward(batch.input);
  const StepResult on_cpu = cpu.forward_backward(batch.input);
  CHECK(std::isnan(on_cpu.loss_sum));
  CHECK(std::isnan(on_gpu.loss_sum));  // fmaxf(NaN, 0) would have hidden it
  // NaN in the same gradient entries, the rest within rounding.
  check_close(cuda->gradients(), cpu.gradients(), batch.input.count, "gradients with a NaN sample");
}

TEST_CASE("a staged copy is dropped once its memory may hold another batch", "[cuda-vs-cpu]") {
  ModelConfig config;
  config.kind = "softmax";
  config.features = 8;
  config.num_classes = 3;
  const auto cuda = make_cuda_backend(world(), true);
  cuda->initialize(config);
  CpuBackend cpu;
  cpu.initialize(config);
  PinnedBatch ring = make_feature_batch(32, 8, ElementType::float32, 3, 1);  // a reused ring buffer
  const PinnedBatch other = make_feature_batch(32, 8, ElementType::float32, 3, 2);
  auto refill = [&] {  // the prefetcher reads the next batch into the same buffer
    std::memcpy(ring.samples.data(), other.samples.data(), 32 * 8 * sizeof(float));
    std::memcpy(ring.labels.data(), other.labels.data(), 32 * sizeof(std::int32_t));
  };
  auto same_step = [&](const std::string& what) {
    cuda->zero_gradients();
    cpu.zero_gradients();
    const StepResult on_gpu = cuda->forward_backward(ring.input);
    const StepResult on_cpu = cpu.forward_backward(ring.input);
    INFO(what);
    CHECK(on_gpu.loss_sum == Approx(on_cpu.loss_sum).epsilon(1e-5));
    check_close(cuda->gradients(), cpu.gradients(), 32, what);
  };

  SECTION("unstaged by its holder before the refill") {
    cuda->stage(ring.input);
    cuda->unstage(ring.input);
    refill();
    same_step("after unstage and refill");
  }
  SECTION("forgotten after a failed call") {
    cuda->stage(ring.input);
    BatchInput wrong = ring.input;
    wrong.features = 9;
    CHECK_THROWS_AS(cuda->stage(wrong), UsageError);
    refill();
    same_step("after a failed stage and refill");
  }
  SECTION("used while the memory still holds it") {
    reset_cuda_backend_stats(*cuda);
    cuda->stage(ring.input);
    same_step("staged and unchanged");
    CHECK(cuda_backend_stats(*cuda).staged_hits == 1);
  }
}

TEST_CASE("the CUDA backend refuses bad batches before the gradients change", "[cuda-vs-cpu]") {
  const auto cuda = make_cuda_backend(world(), true);
  ModelConfig config;
  config.kind = "softmax";
  config.features = 8;
  config.num_classes = 3;
  cuda->initialize(config);
  PinnedBatch batch = make_feature_batch(16, 8, ElementType::float32, 3, 1);
  cuda->forward_backward(batch.input);
  const std::vector<float> before = cuda->gradients();

  reinterpret_cast<std::int32_t*>(batch.labels.data())[5] = 3;
  CHECK_THROWS_AS(cuda->forward_backward(batch.input), DataError);
  BatchInput wrong_width = batch.input;
  wrong_width.features = 9;
  CHECK_THROWS_AS(cuda->forward_backward(wrong_width), UsageError);
  BatchInput no_labels = batch.input;
  no_labels.labels = nullptr;
  CHECK_THROWS_AS(cuda->forward_backward(no_labels), UsageError);
  CHECK(cuda->gradients() == before);

  BatchInput empty = batch.input;
  empty.count = 0;
  const StepResult nothing = cuda->forward_backward(empty);
  CHECK(nothing.count == 0);
  CHECK(nothing.loss_sum == 0.0);
  CHECK(nothing.samples_per_class.empty());
  CHECK(cuda->gradients() == before);

  ModelConfig bag;
  bag.kind = "bag";
  bag.vocab = 16;
  bag.num_classes = 3;
  cuda->initialize(bag);
  PinnedBatch tokens = make_token_batch(8, ElementType::uint16, 3, 16, 4, 0, 3);
  reinterpret_cast<std::int64_t*>(tokens.offsets.data())[4] = -1;
  CHECK_THROWS_AS(cuda->forward_backward(tokens.input), DataError);
}

TEST_CASE("make_backend: cuda and auto pick the CUDA backend where a device works", "[cuda-vs-cpu]") {
  std::string why;
  const auto chosen = make_backend("auto", world(), &why);
  CHECK(chosen->name() == "cuda");
  CHECK(why.find("cuda") != std::string::npos);
  CHECK(make_backend("cuda", world(), nullptr)->name() == "cuda");
  CHECK(make_backend("cpu", world(), nullptr)->name() == "cpu");
  const CudaBackendStats stats = cuda_backend_stats(*chosen);
  CHECK(stats.device >= 0);
  CHECK(stats.device_uuid.rfind("GPU-", 0) == 0);
  CpuBackend cpu;
  CHECK_THROWS_AS(cuda_backend_stats(cpu), UsageError);
}
