#pragma once
// Helpers shared by the class-aware sampler tests (balanced, weighted, stratified).

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "sampler_properties.hpp"
#include "strider/sampling/class_index.hpp"

namespace strider::testing {

/// A class index with labels in blocks (class c: counts[c] consecutive indices).
inline std::shared_ptr<const ClassIndex> blocks(const std::vector<std::int64_t>& counts) {
  return std::make_shared<const ClassIndex>(
      std::make_shared<const std::vector<std::int32_t>>(labels_from_class_counts(counts)),
      static_cast<int>(counts.size()));
}

/// Per rank, the count of each class over the whole current epoch: result[rank][class].
inline std::vector<std::vector<std::int64_t>> rank_class_counts(const SamplerFactory& make, const ClassIndex& index,
                                                                int world, std::int64_t epoch) {
  std::vector<std::vector<std::int64_t>> counts;
  for (int rank = 0; rank < world; ++rank) {
    auto sampler = make(world, rank);
    sampler->set_epoch(epoch);
    std::vector<std::int64_t> all;
    for (const auto& batch : all_batches(*sampler)) all.insert(all.end(), batch.begin(), batch.end());
    counts.push_back(class_histogram(index, all));
  }
  return counts;
}

/// Elastic resume: with the global batch fixed, global batch k is the same multiset at every world
/// size in `worlds`, and a state saved at one world size resumes at the others at the same step.
inline void check_elastic(const std::function<std::unique_ptr<Sampler>(int world, int rank, std::int64_t batch)>& make,
                          std::int64_t global_batch, const std::vector<int>& worlds, std::int64_t epoch) {
  std::vector<std::vector<std::int64_t>> reference;
  for (int world : worlds) {
    CAPTURE(world, global_batch);
    const SamplerFactory factory = [&](int w, int rank) { return make(w, rank, per_rank_batch_for(global_batch, w)); };
    const auto global = global_batches(factory, world, epoch);
    if (reference.empty()) reference = global;
    REQUIRE(global == reference);
    auto saver = factory(world, 0);
    saver->set_epoch(epoch);
    const std::int64_t step = saver->num_steps() / 2;
    const SamplerState saved = saver->state(step);
    for (int other : worlds) {
      for (int rank = 0; rank < other; ++rank) {
        auto resumed = make(other, rank, per_rank_batch_for(global_batch, other));
        REQUIRE(resumed->resume(saved) == step);
      }
    }
  }
}

}  // namespace strider::testing
