#pragma once
// Exact evaluation: every sample of a file predicted once by the model (the Loader's exact split:
// no padding, no sample twice), confusion counts summed over the ranks.

#include "strider/comm/communicator.hpp"
#include "strider/device/backend.hpp"
#include "strider/pipeline/loader_options.hpp"
#include "strider/train/metrics.hpp"

namespace strider::detail {

/// Collective over comm: the checks evaluate_exactly makes on an evaluation file other than the
/// training file, made before training so that a bad --eval-data fails in seconds, not after the last
/// epoch: the file opens with labels, fits the backend's model, and every label lies in
/// 0..num_classes-1 (its labels are read once, then dropped). Failures are agreed.
void check_evaluation_data(const Communicator& comm, const Backend& backend, const LoaderOptions& options,
                           int num_classes);

/// Collective over comm: every rank must call with the same options. Reads options.data_path with
/// a Loader (the split forced to exact, labels required and read with each batch; the rest of
/// `options` as given: keys, engine, batch size, prefetch, allocator) and predicts every sample
/// with `backend`. Checks first that the file fits the backend's model when check_model_fits (an
/// evaluation file other than the training file), and that every label lies in 0..num_classes-1.
/// Returns the counts summed over the ranks (every rank the same); failures are agreed.
ClassCounts evaluate_exactly(const Communicator& comm, Backend& backend, LoaderOptions options, int num_classes,
                             bool check_model_fits);

}  // namespace strider::detail
