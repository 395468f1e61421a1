// Class weight updates at 1..4 ranks: rank 0 computes, every rank ends with bit-identical weights and
// the same weighted plan; failures reach every rank. Collective-safe: checks of local values agree
// across ranks (REQUIRE_ON_ALL_RANKS) or compare gathered values.
#include <catch2/catch.hpp>
#include <cstring>

#include "mpi_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/sampling/weighted_sampler.hpp"
#include "strider/train/class_weight_update.hpp"

using namespace strider;
using strider::testing::world;

namespace {

std::uint64_t bits_hash(const std::vector<double>& values) {
  Fnv1a64 hash;
  hash.add(static_cast<std::int64_t>(values.size()));
  hash.add_bytes(values.data(), values.size() * sizeof(double));
  return hash.value();
}

// Hash of the whole job's weighted plan (every rank's), computed on this rank.
std::uint64_t job_plan_hash(const std::shared_ptr<const ClassIndex>& classes, const std::vector<double>& weights,
                            int world_size) {
  Fnv1a64 hash;
  for (int rank = 0; rank < world_size; ++rank) {
    WeightedSamplerConfig config;
    config.classes = classes;
    config.class_weights = weights;
    config.batch_size = 8;
    config.seed = 1234;
    WeightedSampler sampler(config, world_size, rank);
    sampler.set_epoch(1);
    hash.add(plan_hash(sampler));
  }
  return hash.value();
}

/// Collective: every rank passed the same value.
void require_same_everywhere(const Communicator& comm, std::uint64_t value) {
  const auto all = comm.all_gather(value);
  REQUIRE_ON_ALL_RANKS(all == std::vector<std::uint64_t>(all.size(), value));
}

}  // namespace

TEST_CASE("class weight update: every rank holds bit-identical weights and the same plan", "[mpi][class_weights]") {
  const Communicator& comm = world();
  const auto classes = std::make_shared<const ClassIndex>(
      std::make_shared<const std::vector<std::int32_t>>(labels_from_class_counts({1000, 200, 50})), 3);
  // Each rank starts from slightly different weights and local metrics (as a rank's own recall would be);
  // the metrics are reduced over ranks, and rank 0's weights win.
  std::vector<double> weights = {1.0 / 1000, 1.0 / 200, 1.0 / 50 + 1e-9 * comm.rank()};
  std::vector<double> metrics = {0.9 + 0.01 * comm.rank(), 0.5, 0.1 / (1 + comm.rank())};
  comm.all_reduce(metrics.data(), static_cast<std::int64_t>(metrics.size()), ReduceOp::sum);
  for (double& metric : metrics) metric /= comm.size();
  update_class_weights(comm, weights, metrics);
  require_same_everywhere(comm, bits_hash(weights));
  require_same_everywhere(comm, job_plan_hash(classes, weights, comm.size()));
  // The rule's effect: the best-recalled class lost weight relative to the worst.
  REQUIRE_ON_ALL_RANKS(weights[0] * 1000 < weights[2] * 50);

  // A user function, run on rank 0 only.
  int calls = 0;
  update_class_weights(comm, weights, metrics, [&](const std::vector<double>& current, const std::vector<double>&) {
    ++calls;
    std::vector<double> doubled = current;
    doubled[1] *= 2;
    return doubled;
  });
  REQUIRE_ON_ALL_RANKS(calls == (comm.is_root() ? 1 : 0));
  require_same_everywhere(comm, bits_hash(weights));
  require_same_everywhere(comm, job_plan_hash(classes, weights, comm.size()));
}

TEST_CASE("class weight update: a bad update on rank 0 fails on every rank", "[mpi][class_weights][failure]") {
  const Communicator& comm = world();
  std::vector<double> weights = {1, 1, 1};
  const std::vector<double> original = weights;
  int threw = 0;
  try {
    update_class_weights(comm, weights, {0.5, 2.0, 0.1});  // metric outside [0, 1]
  } catch (const AgreedError& error) {
    threw = error.failing_rank() == 0 && error.exit_code() == 2 ? 1 : 0;
  }
  REQUIRE(comm.all_reduce(threw, ReduceOp::min) == 1);
  REQUIRE_ON_ALL_RANKS(weights == original);
  threw = 0;
  try {
    update_class_weights(comm, weights, {0, 0, 0}, [](const std::vector<double>&, const std::vector<double>&) {
      return std::vector<double>{0, 0, 0};
    });
  } catch (const AgreedError& error) {
    threw = std::string(error.what()).find("all zero") != std::string::npos ? 1 : 0;
  }
  REQUIRE(comm.all_reduce(threw, ReduceOp::min) == 1);
  REQUIRE_ON_ALL_RANKS(weights == original);
}
