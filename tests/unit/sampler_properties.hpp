#pragma once
// Invariants every sampling mode is tested against, written once (STYLE.md 11). A mode's test calls
// check_sampler_invariants with a factory that builds rank r of R's sampler.

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "strider/sampling/sampler.hpp"

namespace strider::testing {

using SamplerFactory = std::function<std::unique_ptr<Sampler>(int world_size, int rank)>;

/// Every batch of one rank's current epoch.
inline std::vector<std::vector<std::int64_t>> all_batches(const Sampler& sampler, std::int64_t first_step = 0) {
  std::vector<std::vector<std::int64_t>> batches;
  for (std::int64_t step = first_step; step < sampler.num_steps(); ++step) {
    batches.emplace_back();
    sampler.batch(step, batches.back());
  }
  return batches;
}

struct InvariantOptions {
  int world_size = 3;
  std::int64_t epoch = 1;
  bool equal_batch_sizes = true;  // every mode but bucketed: the same number of samples per step
  bool epoch_sensitive = true;    // the plan changes with the epoch (false: no shuffle)
};

/// Equal steps (and samples per step), determinism, epoch sensitivity, resume == tail of the
/// uninterrupted epoch at every step, and the saved state surviving serialisation.
inline void check_sampler_invariants(const SamplerFactory& make, const InvariantOptions& options) {
  const int world = options.world_size;
  std::vector<std::unique_ptr<Sampler>> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.push_back(make(world, rank));
    ranks.back()->set_epoch(options.epoch);
  }
  const std::int64_t steps = ranks[0]->num_steps();

  // Equal steps and (where promised) equal batch sizes on every rank.
  for (int rank = 0; rank < world; ++rank) {
    CAPTURE(rank);
    REQUIRE(ranks[rank]->num_steps() == steps);
    if (options.equal_batch_sizes) {
      const auto mine = all_batches(*ranks[rank]), first = all_batches(*ranks[0]);
      for (std::int64_t step = 0; step < steps; ++step) REQUIRE(mine[step].size() == first[step].size());
    }
    for (const auto& batch : all_batches(*ranks[rank]))
      REQUIRE(static_cast<std::int64_t>(batch.size()) <= ranks[rank]->max_batch_size());
  }

  // Determinism: a second sampler with the same inputs gives the same plan.
  for (int rank = 0; rank < world; ++rank) {
    auto again = make(world, rank);
    again->set_epoch(options.epoch);
    REQUIRE(plan_hash(*again) == plan_hash(*ranks[rank]));
  }

  // Epoch sensitivity.
  if (options.epoch_sensitive) {
    auto other = make(world, 0);
    other->set_epoch(options.epoch + 1);
    REQUIRE(plan_hash(*other) != plan_hash(*ranks[0]));
  }

  // Resume at every step (a spread of steps when there are many, always the last ones) equals the tail.
  std::set<std::int64_t> resume_steps = {steps};
  const std::int64_t stride = std::max<std::int64_t>(1, steps / 17);
  for (std::int64_t step = 0; step < steps; step += stride) resume_steps.insert(step);
  if (steps > 0) resume_steps.insert(steps - 1);
  for (int rank = 0; rank < world; ++rank) {
    const auto full = all_batches(*ranks[rank]);
    for (std::int64_t step : resume_steps) {
      CAPTURE(rank, step);
      const SamplerState saved = ranks[rank]->state(step);
      const SamplerState parsed = SamplerState::parse(saved.serialize());
      REQUIRE(parsed == saved);
      auto resumed = make(world, rank);
      const std::int64_t resume_step = resumed->resume(parsed);
      REQUIRE(resume_step == step);
      REQUIRE(resumed->epoch() == options.epoch);
      const auto tail = all_batches(*resumed, resume_step);
      REQUIRE(tail == std::vector<std::vector<std::int64_t>>(full.begin() + step, full.end()));
    }
  }
}

/// The multiset of every rank's indices over one epoch.
inline std::map<std::int64_t, std::int64_t> index_counts(const SamplerFactory& make, int world, std::int64_t epoch) {
  std::map<std::int64_t, std::int64_t> counts;
  for (int rank = 0; rank < world; ++rank) {
    auto sampler = make(world, rank);
    sampler->set_epoch(epoch);
    for (const auto& batch : all_batches(*sampler))
      for (std::int64_t index : batch) ++counts[index];
  }
  return counts;
}

/// Global batch k as a sorted multiset: the union of every rank's k-th batch.
inline std::vector<std::vector<std::int64_t>> global_batches(const SamplerFactory& make, int world,
                                                             std::int64_t epoch) {
  std::vector<std::vector<std::int64_t>> global;
  for (int rank = 0; rank < world; ++rank) {
    auto sampler = make(world, rank);
    sampler->set_epoch(epoch);
    const auto batches = all_batches(*sampler);
    global.resize(batches.size());
    for (std::size_t step = 0; step < batches.size(); ++step)
      global[step].insert(global[step].end(), batches[step].begin(), batches[step].end());
  }
  for (auto& batch : global) std::sort(batch.begin(), batch.end());
  return global;
}

}  // namespace strider::testing
