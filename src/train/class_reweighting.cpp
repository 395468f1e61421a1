#include "train/class_reweighting.hpp"

#include "strider/train/class_weight_update.hpp"

namespace strider::detail {

bool sampler_supports_reweighting(const std::string& mode) {
  return mode == "weighted";
}

std::vector<double> agree_on_new_class_weights(const Communicator& comm, std::vector<double> weights,
                                               const SharedView<std::int32_t>& labels,
                                               const std::vector<double>& recall) {
  if (weights.empty()) {
    std::vector<double> counts(recall.size(), 0.0);
    for (std::int32_t label : labels)
      if (label >= 0 && static_cast<std::size_t>(label) < counts.size()) counts[static_cast<std::size_t>(label)] += 1;
    weights.resize(recall.size());
    for (std::size_t c = 0; c < counts.size(); ++c) weights[c] = counts[c] > 0 ? 1.0 / counts[c] : 0.0;
  }
  update_class_weights(comm, weights, recall);
  return weights;
}

}  // namespace strider::detail
