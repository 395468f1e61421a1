#include "train/training_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "strider/core/error.hpp"
#include "strider/device/step_batches.hpp"
#include "strider/train/batch_input.hpp"
#include "strider/train/metrics.hpp"
#include "strider/train/stop_signal.hpp"

namespace strider::detail {

StepResult TrainingLoop::compute(const Batch& batch, EpochTotals& totals) {
  if (batch.offsets() != nullptr) {
    std::int64_t longest = 0;
    for (std::int64_t i = 0; i < batch.size(); ++i)
      longest = std::max(longest, batch.offsets()[i + 1] - batch.offsets()[i]);
    totals.real_tokens += static_cast<double>(batch.offsets()[batch.size()]);
    totals.padded_tokens += static_cast<double>(longest * batch.size());
  }
  return backend_.forward_backward(batch_input(batch, dataset_));
}

EpochTotals TrainingLoop::run(LoaderEpoch& epoch, const AfterStep& after_step) {
  EpochTotals totals;
  totals.steps_done = epoch.first_step();
  const auto classes = static_cast<std::size_t>(backend_.config().num_classes);
  totals.samples_per_class.assign(classes, 0);
  totals.correct_per_class.assign(classes, 0);
  // The current batch and, with staging, the next one, whose copy overlaps the step; a staged batch
  // is unstaged before it goes back to the ring, however the loop ends.
  StepBatches<Batch> batches(backend_, settings_.stage_next);
  const auto input_of = [this](const Batch& held) { return batch_input(held, dataset_); };
  for (std::int64_t step = epoch.first_step(); step < epoch.end_step(); ++step) {
    watchdog_.step_started(epoch.epoch(), step);
    StepResult local;
    comm_.collective_try([&] {
      const Batch* batch = batches.advance([&] { return epoch.next(); }, input_of, step + 1 < epoch.end_step());
      if (batch == nullptr) STRIDER_THROW(Error, "the prefetcher ended before step " + std::to_string(step));
      trace_.write(epoch.epoch(), step, batch->indices());
      local = compute(*batch, totals);
      if (step == hooks_.hang_step)  // test-only: this rank never finishes the step (a stuck read or peer)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (hooks_.step_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(hooks_.step_delay_us));
    });
    // Samples, stop signals and ranks whose loss is not finite, summed in one all-reduce.
    std::int64_t shared[3] = {local.count, stop_signal_received() ? 1 : 0, std::isfinite(local.loss_sum) ? 0 : 1};
    comm_.all_reduce(shared, 3, ReduceOp::sum);
    if (shared[2] > 0) throw_diverged(epoch.epoch(), step, std::isfinite(local.loss_sum), shared[2]);
    backend_.all_reduce_gradients(comm_, shared[0]);
    backend_.apply_sgd(settings_.learning_rate, settings_.momentum);
    totals.loss_sum += local.loss_sum;
    totals.correct += local.correct;
    totals.count += local.count;
    for (std::size_t k = 0; k < local.samples_per_class.size() && k < classes; ++k) {
      totals.samples_per_class[k] += local.samples_per_class[k];
      totals.correct_per_class[k] += local.correct_per_class[k];
    }
    totals.steps_done = step + 1;
    totals.stopped = shared[1] > 0;  // a stop signal reached some rank: every rank stops after this same step
    after_step(totals.steps_done, totals.stopped, shared[0]);
    if (totals.stopped) break;
  }
  watchdog_.pause();
  trace_.flush();
  return totals;
}

void TrainingLoop::throw_diverged(std::int64_t epoch, std::int64_t step, bool finite_here, std::int64_t ranks) const {
  // The lowest rank whose loss is not finite speaks for all, as in Communicator::agree.
  const int first = comm_.all_reduce(finite_here ? comm_.size() : comm_.rank(), ReduceOp::min);
  // Inputs of large magnitude trained as stored diverge at any usual learning rate: say so first.
  const std::string cure = settings_.normalize_hint.empty()
                               ? "training diverged (try a lower " + settings_.learning_rate_name + ")"
                               : "training diverged on inputs that are not normalized (try " +
                                     settings_.normalize_hint + ", or a lower " + settings_.learning_rate_name + ")";
  throw AgreedError("[rank " + std::to_string(first) + "] the training loss is NaN or infinite at epoch " +
                        std::to_string(epoch) + " step " + std::to_string(step) + " (on " + std::to_string(ranks) +
                        " of " + std::to_string(comm_.size()) + " ranks): " + cure +
                        " or the data holds NaN or infinite values",
                    first, 1);
}

EpochSummary summarize_epoch(const Communicator& comm, std::int64_t epoch, std::int64_t first_step,
                             const EpochTotals& totals, double seconds, double stall_seconds,
                             const std::vector<double>& class_weights) {
  double sums[4] = {totals.loss_sum, static_cast<double>(totals.correct), totals.real_tokens, totals.padded_tokens};
  comm.all_reduce(sums, 4, ReduceOp::sum);
  const std::int64_t global_count = comm.all_reduce(totals.count, ReduceOp::sum);
  const double stall = seconds > 0 ? stall_seconds / seconds : 0.0;
  EpochSummary summary;
  summary.epoch = epoch;
  summary.samples = global_count;
  summary.steps = totals.steps_done - first_step;
  summary.seconds = comm.all_reduce(seconds, ReduceOp::max);
  summary.loss = global_count > 0 ? sums[0] / static_cast<double>(global_count) : 0.0;
  summary.accuracy = global_count > 0 ? sums[1] / static_cast<double>(global_count) : 0.0;
  summary.samples_per_s = summary.seconds > 0 ? static_cast<double>(global_count) / summary.seconds : 0.0;
  summary.stall_fraction = comm.all_reduce(stall, ReduceOp::max);
  summary.class_weights = class_weights;
  summary.padding_efficiency = sums[3] > 0 ? sums[2] / sums[3] : 1.0;
  if (!totals.samples_per_class.empty()) {
    // Samples, then correct, per class: one all-reduce of integers, so the recall is exact.
    std::vector<std::int64_t> per_class = totals.samples_per_class;
    per_class.insert(per_class.end(), totals.correct_per_class.begin(), totals.correct_per_class.end());
    comm.all_reduce(per_class.data(), static_cast<std::int64_t>(per_class.size()), ReduceOp::sum);
    const auto middle = per_class.begin() + static_cast<std::ptrdiff_t>(totals.samples_per_class.size());
    summary.per_class_recall = per_class_recall({middle, per_class.end()}, {per_class.begin(), middle});
  }
  return summary;
}

}  // namespace strider::detail
