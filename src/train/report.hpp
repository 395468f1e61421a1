#pragma once
// The lines strider-train prints as it trains (rank 0, through print_on_root): one per epoch, one
// per evaluation, the class weights after a re-weighting, and the stop on a signal. The JSON form
// is write_train_stats_json (strider/train/summary.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "strider/train/summary.hpp"

namespace strider::detail {

/// "epoch 2/5: loss 0.1234 accuracy 0.957 samples/s 81234 stall 1.2% (40 steps, 0.52 s)", with
/// " (stopped)" after the epoch count when a signal stopped it and the padding efficiency for
/// sequences.
std::string epoch_line(const EpochSummary& epoch, std::int64_t epochs, bool stopped, bool sequences);

/// "evaluation on PATH: accuracy 0.957 over 4000 samples (0.12 s); per-class recall 0:0.990 1:0.850".
std::string evaluation_line(const std::string& path, double accuracy, std::int64_t samples, double seconds,
                            const std::vector<double>& recall);

/// The run's last line: "per-class recall: 0:0.990 1:0.850".
std::string final_recall_line(const std::vector<double>& recall);

/// After a re-weighting: "class weights now 0.5,1.5" (each weight with the digits to read it back).
std::string class_weights_line(const std::vector<double>& weights);

/// After a stop signal, once the checkpoint is written.
std::string stopped_line();

}  // namespace strider::detail
