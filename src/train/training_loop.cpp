#include "train/training_loop.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "strider/core/error.hpp"
#include "strider/train/batch_input.hpp"
#include "strider/train/stop_signal.hpp"

namespace strider::detail {

Batch TrainingLoop::take_batch(LoaderEpoch& epoch, std::int64_t step, std::optional<Batch>& upcoming) {
  std::optional<Batch> batch = upcoming ? std::move(upcoming) : epoch.next();
  upcoming.reset();
  if (!batch) STRIDER_THROW(Error, "the prefetcher ended before step " + std::to_string(step));
  if (settings_.stage_next && step + 1 < epoch.end_step()) {  // the copy of batch k+1 overlaps step k
    upcoming = epoch.next();
    if (upcoming) backend_.stage(batch_input(*upcoming, dataset_));
  }
  return std::move(*batch);
}

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
  std::optional<Batch> upcoming;  // the next step's batch, already staged on the device
  for (std::int64_t step = epoch.first_step(); step < epoch.end_step(); ++step) {
    watchdog_.step_started(epoch.epoch(), step);
    StepResult local;
    comm_.collective_try([&] {
      const Batch batch = take_batch(epoch, step, upcoming);
      trace_.write(epoch.epoch(), step, batch.indices());
      local = compute(batch, totals);
      if (step == hooks_.hang_step)  // test-only: this rank never finishes the step (a stuck read or peer)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (hooks_.step_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(hooks_.step_delay_us));
    });
    std::int64_t shared[2] = {local.count, stop_signal_received() ? 1 : 0};
    comm_.all_reduce(shared, 2, ReduceOp::sum);
    backend_.all_reduce_gradients(comm_, shared[0]);
    backend_.apply_sgd(settings_.learning_rate, settings_.momentum);
    totals.loss_sum += local.loss_sum;
    totals.correct += local.correct;
    totals.count += local.count;
    totals.steps_done = step + 1;
    totals.stopped = shared[1] > 0;  // a stop signal reached some rank: every rank stops after this same step
    after_step(totals.steps_done, totals.stopped);
    if (totals.stopped) break;
  }
  watchdog_.pause();
  trace_.flush();
  return totals;
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
  return summary;
}

}  // namespace strider::detail
