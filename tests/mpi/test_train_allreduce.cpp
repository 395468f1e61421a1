// The CPU backend's gradient all-reduce at 1..4 ranks: ranks with different batch sizes (one of them
// empty) give exactly the mean gradient of the union of their batches; parameters stay identical on
// every rank; class counts sum across ranks; make_backend picks the CPU in a CPU-only build.
// Collective-safe: checks of local values agree across ranks (REQUIRE_ON_ALL_RANKS); a plain REQUIRE
// only checks a value an all-reduce or all-gather made the same on every rank.
#include <catch2/catch.hpp>
#include <cmath>

#include "mpi_test_support.hpp"
#include "strider/config.hpp"
#include "strider/core/hash.hpp"
#include "strider/device/backend.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/sampling/random.hpp"
#include "strider/train/metrics.hpp"

using namespace strider;
using strider::testing::world;

namespace {

/// The union batch of every rank: fixed-size int16 features or uint8 token rows, labels in 0..2.
struct UnionBatch {
  std::int64_t features = 0;  // 0: sequences
  std::vector<std::int16_t> samples;
  std::vector<std::uint8_t> tokens;
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int32_t> labels;
  std::vector<std::int64_t> first_row{0};  // rank r owns rows [first_row[r], first_row[r+1])

  BatchInput rows(std::int64_t first, std::int64_t end) const {
    BatchInput input;
    input.count = end - first;
    input.labels = labels.data() + first;
    input.features = features;
    if (features > 0) {
      input.type = ElementType::int16;
      input.samples = reinterpret_cast<const std::byte*>(samples.data() + first * features);
    } else {
      input.type = ElementType::uint8;
      input.samples = reinterpret_cast<const std::byte*>(tokens.data() + offsets[static_cast<std::size_t>(first)]);
      input.offsets = offsets.data() + first;
    }
    return input;
  }
  BatchInput of_rank(int rank) const {
    return rows(first_row[static_cast<std::size_t>(rank)], first_row[static_cast<std::size_t>(rank) + 1]);
  }
};

/// Rank r holds 2r+3 samples, except rank 1 which holds none (an empty token-budget batch).
UnionBatch make_union(int ranks, std::int64_t features, std::uint64_t seed) {
  UnionBatch batch;
  batch.features = features;
  std::uint64_t draw = seed * 1000;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::int64_t count = rank == 1 ? 0 : 2 * rank + 3;
    for (std::int64_t i = 0; i < count; ++i) {
      batch.labels.push_back(static_cast<std::int32_t>(mix64(++draw) % 3));
      if (features > 0) {
        for (std::int64_t f = 0; f < features; ++f)
          batch.samples.push_back(static_cast<std::int16_t>(mix64(++draw) % 9) - 4);
      } else {
        const auto length = static_cast<std::int64_t>(mix64(++draw) % 7);
        for (std::int64_t t = 0; t < length; ++t) batch.tokens.push_back(static_cast<std::uint8_t>(mix64(++draw) % 20));
        batch.offsets.push_back(static_cast<std::int64_t>(batch.tokens.size()));
      }
    }
    batch.first_row.push_back(static_cast<std::int64_t>(batch.labels.size()));
  }
  return batch;
}

ModelConfig config_for(const std::string& kind) {
  ModelConfig config;
  config.kind = kind;
  config.num_classes = 3;
  config.features = kind == "bag" ? 0 : 4;
  config.hidden = 5;
  config.vocab = 20;
  config.embed_dim = 3;
  config.seed = 21;
  return config;
}

std::uint64_t hash_of(const std::vector<float>& values) {
  Fnv1a64 hash;
  hash.add_bytes(values.data(), values.size() * sizeof(float));
  return hash.value();
}

}  // namespace

TEST_CASE("all_reduce_gradients equals the single-rank gradient of the union batch", "[mpi][train]") {
  const Communicator& comm = world();
  for (const std::string kind : {"softmax", "mlp", "bag"}) {
    const ModelConfig config = config_for(kind);
    const UnionBatch batch = make_union(comm.size(), config.features, 3);
    const std::int64_t union_count = static_cast<std::int64_t>(batch.labels.size());

    // Reference: one backend sees the whole union batch.
    CpuBackend reference;
    reference.initialize(config);
    const StepResult union_result = reference.forward_backward(batch.rows(0, union_count));
    const std::vector<float> summed = reference.gradients();
    reference.scale_gradients(union_count);
    const std::vector<float> expected = reference.gradients();
    // The mean is the sum over the batch divided by its size (also what the distributed side must
    // match: a scale_gradients that divided by nothing would pass the comparison below).
    bool mean_of_sum = expected.size() == summed.size();
    for (std::size_t i = 0; mean_of_sum && i < expected.size(); ++i)
      mean_of_sum = expected[i] == Approx(summed[i] / static_cast<float>(union_count)).epsilon(1e-6).margin(1e-12);
    REQUIRE_ON_ALL_RANKS(mean_of_sum);

    // Distributed: each rank its own slice, then the all-reduce.
    CpuBackend backend;
    backend.initialize(config);
    const StepResult local = backend.forward_backward(batch.of_rank(comm.rank()));
    const std::int64_t global_count = comm.all_reduce(local.count, ReduceOp::sum);
    const double global_loss = comm.all_reduce(local.loss_sum, ReduceOp::sum);
    const std::int64_t global_correct = comm.all_reduce(local.correct, ReduceOp::sum);
    backend.all_reduce_gradients(comm, global_count);
    const std::vector<float> gradients = backend.gradients();

    double worst = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(gradients[i] - expected[i])));
    }
    const double worst_anywhere = comm.all_reduce(worst, ReduceOp::max);
    const std::uint64_t gradient_hash = hash_of(gradients);
    const auto hashes = comm.all_gather(gradient_hash);
    INFO(kind << ": worst gradient difference " << worst_anywhere << " at " << comm.size() << " ranks");
    REQUIRE_ON_ALL_RANKS(global_count == union_count);
    REQUIRE_ON_ALL_RANKS(global_correct == union_result.correct);
    REQUIRE_ON_ALL_RANKS(global_loss == Approx(union_result.loss_sum).epsilon(1e-9));
    REQUIRE(worst_anywhere <= 1e-6);  // agreed: the result of an all-reduce
    // Bit-identical on every rank.
    REQUIRE_ON_ALL_RANKS(hashes == std::vector<std::uint64_t>(hashes.size(), gradient_hash));
    if (comm.size() == 1) REQUIRE(worst_anywhere == 0.0);

    // A few SGD steps later the parameters are still identical on every rank.
    for (int step = 0; step < 3; ++step) {
      backend.apply_sgd(0.1f, 0.9f);
      const StepResult next = backend.forward_backward(batch.of_rank(comm.rank()));
      backend.all_reduce_gradients(comm, comm.all_reduce(next.count, ReduceOp::sum));
    }
    const std::uint64_t parameter_hash = hash_of(backend.parameters());
    const auto parameter_hashes = comm.all_gather(parameter_hash);
    REQUIRE_ON_ALL_RANKS(parameter_hashes == std::vector<std::uint64_t>(parameter_hashes.size(), parameter_hash));
  }
}

TEST_CASE("class counts sum exactly across ranks", "[mpi][train]") {
  const Communicator& comm = world();
  ClassCounts counts(2);
  // Rank r counts r+1 samples of class 0 predicted right, and one of class 1 predicted as 0.
  std::vector<std::int32_t> labels(static_cast<std::size_t>(comm.rank() + 1), 0);
  labels.push_back(1);
  const std::vector<std::int32_t> predictions(labels.size(), 0);
  counts.add(labels.data(), predictions.data(), static_cast<std::int64_t>(labels.size()));
  counts.all_reduce(comm);
  const std::int64_t class_zero = std::int64_t{comm.size()} * (comm.size() + 1) / 2;
  REQUIRE_ON_ALL_RANKS(counts.support(0) == class_zero);
  REQUIRE_ON_ALL_RANKS(counts.support(1) == comm.size());
  REQUIRE_ON_ALL_RANKS(counts.recall() == std::vector<double>{1.0, 0.0});
  REQUIRE_ON_ALL_RANKS(counts.total() == class_zero + comm.size());
}

TEST_CASE("make_backend: cpu on request, auto falls back with a reason, cuda needs CUDA", "[mpi][train]") {
  const Communicator& comm = world();
  std::string why;
  REQUIRE_ON_ALL_RANKS(make_backend("cpu", comm, &why)->name() == "cpu");
  REQUIRE_ON_ALL_RANKS(why == "cpu backend: requested with --backend cpu");
  const auto refused = [&](const std::string& kind) {
    try {
      make_backend(kind, comm, &why);
    } catch (const UsageError&) {
      return true;
    }
    return false;
  };
  REQUIRE_ON_ALL_RANKS(refused("tpu"));
  if (!STRIDER_HAS_CUDA) {
    REQUIRE_ON_ALL_RANKS(make_backend("auto", comm, &why)->name() == "cpu");
    REQUIRE_ON_ALL_RANKS(why.rfind("cpu backend: no usable GPU (strider was built without CUDA", 0) == 0);
    REQUIRE_ON_ALL_RANKS(refused("cuda"));
  }
}
