#pragma once
// One epoch of training steps: take the step's batch (staging the next one on the device where the
// backend overlaps copies), forward and backward on the backend, agree on the sample count, on a
// stop signal and on a finite loss, all-reduce the gradients, apply SGD. The run around it (src/train/trainer.cpp)
// starts epochs, checkpoints, evaluates and reports.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/test_hooks.hpp"
#include "strider/comm/communicator.hpp"
#include "strider/device/backend.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/train/summary.hpp"
#include "strider/train/watchdog.hpp"
#include "train/sample_trace.hpp"

namespace strider::detail {

/// What one epoch's steps added up to on this rank.
struct EpochTotals {
  double loss_sum = 0.0;        ///< summed cross-entropy of the samples trained
  std::int64_t correct = 0;     ///< samples predicted right before their update
  std::int64_t count = 0;       ///< samples trained
  double real_tokens = 0.0;     ///< sequences: tokens in the batches
  double padded_tokens = 0.0;   ///< sequences: sum over batches of count x longest row
  std::int64_t steps_done = 0;  ///< the epoch's steps finished, counted from its step 0
  bool stopped = false;         ///< a stop signal ended the epoch early (on every rank alike)
  /// Per class (the model's num_classes entries): samples trained, and of those predicted right.
  std::vector<std::int64_t> samples_per_class;
  std::vector<std::int64_t> correct_per_class;
};

/// The optimizer's settings and whether to stage the next batch during a step.
struct StepSettings {
  float learning_rate = 0.1f;
  float momentum = 0.9f;
  /// Copy batch k+1 to the device while step k runs (Backend::stage): a backend that overlaps
  /// copies. The loop then holds two batches: give the Loader batches_held = 2.
  bool stage_next = false;
  /// How the caller names the learning rate in messages ("--lr").
  std::string learning_rate_name = "the learning rate";
  /// Inputs of large magnitude trained as stored: what a divergence names as the cure ("--normalize auto");
  /// empty: the inputs are normalized, small, or token sequences.
  std::string normalize_hint;
};

/// Runs the steps of a Loader's epochs on a backend. Holds references: everything given must
/// outlive it. `hooks`: the test-only hang and delay of a step (core/test_hooks.hpp). One thread.
class TrainingLoop {
 public:
  TrainingLoop(const Communicator& comm, Backend& backend, const DatasetInfo& dataset, StepSettings settings,
               SampleTrace& trace, StepWatchdog& watchdog, TestHooks hooks) noexcept
      : comm_(comm),
        backend_(backend),
        dataset_(dataset),
        settings_(settings),
        trace_(trace),
        watchdog_(watchdog),
        hooks_(hooks) {}

  /// Called after every finished step with the steps done in the epoch (from its step 0), whether a
  /// stop signal ends the epoch after this step, and the step's samples over every rank.
  using AfterStep = std::function<void(std::int64_t steps_done, bool stopping, std::int64_t samples)>;

  /// Collective over comm: every rank must call with its LoaderEpoch of the same epoch. Trains steps
  /// [epoch.first_step(), epoch.end_step()), writing each step's samples to the trace; stops after a
  /// step in which any rank received a stop signal. A failure on one rank (a read, the step) is
  /// agreed: every rank throws the same AgreedError; so is a NaN or infinite loss on any rank, before
  /// that step's gradients are all-reduced. Pauses the watchdog when it returns.
  EpochTotals run(LoaderEpoch& epoch, const AfterStep& after_step);

 private:
  /// Forward and backward on this rank's batch (adds the sequences' token counts to totals).
  StepResult compute(const Batch& batch, EpochTotals& totals);
  /// Collective: every rank calls it after the step's all-reduce counted `ranks` ranks whose loss is
  /// not finite; throws the same AgreedError on every rank.
  [[noreturn]] void throw_diverged(std::int64_t epoch, std::int64_t step, bool finite_here, std::int64_t ranks) const;

  const Communicator& comm_;
  Backend& backend_;
  const DatasetInfo& dataset_;
  StepSettings settings_;
  SampleTrace& trace_;
  StepWatchdog& watchdog_;
  TestHooks hooks_;
};

/// Collective over comm: the epoch's figures over all ranks from each rank's totals, its wall time
/// in seconds and the time it waited for batches (stall). class_weights: those in force. Every rank's
/// totals must hold per-class counts of the same length (none: no per_class_recall).
EpochSummary summarize_epoch(const Communicator& comm, std::int64_t epoch, std::int64_t first_step,
                             const EpochTotals& totals, double seconds, double stall_seconds,
                             const std::vector<double>& class_weights);

}  // namespace strider::detail
