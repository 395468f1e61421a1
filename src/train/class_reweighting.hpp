#pragma once
// Re-weighting classes between epochs from the evaluation's per-class recall (--reweight-every):
// the trainer's glue around update_class_weights (strider/train/class_weight_update.hpp).

#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/core/shared_view.hpp"

namespace strider::detail {

/// Whether --sampler MODE has class weights that --reweight-every can change.
bool sampler_supports_reweighting(const std::string& mode);

/// Collective over comm: the next class weights from the current ones (empty: the weighted
/// sampler's default 1/count from the labels) and the per-class recall, computed on rank 0 with the
/// common rule and broadcast, so every rank holds bit-identical weights.
std::vector<double> agree_on_new_class_weights(const Communicator& comm, std::vector<double> weights,
                                               const SharedView<std::int32_t>& labels,
                                               const std::vector<double>& recall);

}  // namespace strider::detail
