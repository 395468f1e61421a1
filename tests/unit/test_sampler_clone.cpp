// Sampler::clone: a copy of a planned sampler has its plan (the Loader's plan-ahead sampler starts
// from one instead of planning epoch 0 again), and the two plan on independently afterwards.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "sampler_properties.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/sampling/exact_split_sampler.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/sampling/synthetic_lengths.hpp"

using namespace strider;
using strider::testing::all_batches;

TEST_CASE("sampler clone: every mode copies its plan and plans on alone", "[sampler][clone]") {
  SamplerOptions options;
  options.dataset_size = 600;
  options.batch_size = 16;
  options.seed = 5;
  options.labels = std::make_shared<const std::vector<std::int32_t>>(labels_from_class_counts({400, 150, 50}));
  options.lengths = std::make_shared<const std::vector<std::int64_t>>(
      synthetic_lengths("uniform:min=1,max=60", options.dataset_size, 2));
  options.max_tokens = 240;
  options.block_size = 10;
  std::vector<std::unique_ptr<Sampler>> samplers;
  for (const std::string& mode : sampler_modes()) {
    options.mode = mode;
    samplers.push_back(make_sampler(options, 3, 1));
  }
  samplers.push_back(std::make_unique<ExactSplitSampler>(600, 16, 3, 1));
  for (const std::unique_ptr<Sampler>& original : samplers) {
    CAPTURE(original->mode());
    original->set_epoch(2);
    const std::vector<std::vector<std::int64_t>> epoch2 = all_batches(*original);
    const std::unique_ptr<Sampler> copy = original->clone();
    REQUIRE(copy != nullptr);
    REQUIRE(copy->mode() == original->mode());
    REQUIRE(copy->epoch() == 2);
    REQUIRE(copy->config_hash() == original->config_hash());
    REQUIRE(all_batches(*copy) == epoch2);
    // Independent: the copy's next epoch leaves the original's plan as it was, and is the plan a
    // sampler of its own makes for that epoch.
    copy->set_epoch(3);
    REQUIRE(all_batches(*original) == epoch2);
    original->set_epoch(3);
    REQUIRE(all_batches(*copy) == all_batches(*original));
  }
}
