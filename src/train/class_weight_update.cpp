#include "strider/train/class_weight_update.hpp"

namespace strider {

namespace {

// Rank 0 computes (checked by apply_class_weight_function), every rank receives.
void broadcast_from_root(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                         const ClassWeightFunction& update) {
  std::vector<double> updated;
  comm.collective_try([&] {
    if (comm.is_root()) updated = apply_class_weight_function(weights, metrics, update);
  });
  comm.broadcast(updated);
  weights = std::move(updated);
}

}  // namespace

void update_class_weights(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                          const ClassWeightRule& rule) {
  broadcast_from_root(comm, weights, metrics,
                      [&rule](const std::vector<double>& current, const std::vector<double>& values) {
                        return apply_class_weight_rule(current, values, rule);
                      });
}

void update_class_weights(const Communicator& comm, std::vector<double>& weights, const std::vector<double>& metrics,
                          const ClassWeightFunction& update) {
  broadcast_from_root(comm, weights, metrics, update);
}

}  // namespace strider
