#pragma once
/// \file
/// Class weights that change between epochs, agreed across ranks: rank 0 computes the new weights
/// from per-class metrics (the pure functions of strider/sampling/class_weights.hpp) and broadcasts
/// them, so every rank holds bit-identical weights and hence builds the same weighted plan.

#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/sampling/class_weights.hpp"

namespace strider {

/// Collective over comm: every rank must call. Rank 0 applies `rule` to its weights and metrics
/// (the metrics should already be reduced over ranks, e.g. with all_reduce) and broadcasts the
/// result into `weights` on every rank. A failure on rank 0 (bad metrics) is raised on every rank
/// as the same AgreedError; no rank is left waiting.
void update_class_weights(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                          const ClassWeightRule& rule = {});

/// Collective over comm: every rank must call. As above with a user function run on rank 0; its
/// result must be valid weights (finite, >= 0, not all zero, one per class) or every rank throws.
void update_class_weights(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                          const ClassWeightFunction& update);

}  // namespace strider
