// train() at 1..4 ranks, called as a library: settings refused in the caller's words, the steps
// trained are exactly the sampler's plan (each rank's sample trace against a sampler built by hand),
// evaluation counts every sample once, and a run resumed from a checkpoint (an epoch's end, or the
// step where a stop signal ended it) continues with the same samples and the same loss, R ranks train as one
// rank with their global batch, an epoch's per-class recall counts every rank's samples, and a checkpoint of
// other data is refused. Every check is agreed across ranks before it is asserted.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "mpi_test_support.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/train/stop_signal.hpp"
#include "strider/train/trainer.hpp"
#include "train/training_loop.hpp"

using namespace strider;
using strider::testing::world;

namespace {

/// Collective: the failure train(config) agreed on ("" when it returned), and its exit code.
std::pair<std::string, int> agreed_failure(const TrainerConfig& config) {
  try {
    train(world(), config);
  } catch (const AgreedError& error) {
    return {error.reason(), error.exit_code()};
  }
  return {"", 0};
}

/// train() installs the stop-signal handlers; the test binary gets its default ones back.
struct DefaultSignalsAfterwards {
  ~DefaultSignalsAfterwards() {
    std::signal(SIGUSR1, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
};

/// Lines of this rank's trace file `base`.rank<r>.
std::vector<std::string> trace_lines(const std::string& base) {
  std::ifstream file(base + ".rank" + std::to_string(world().rank()));
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("trainer: settings are refused on every rank, named as the caller names them", "[mpi][trainer]") {
  TrainerConfig config;
  config.loader.data_path = "/nonexistent/never-opened.h5";  // the settings are checked first
  config.epochs = 0;
  const auto [library_words, library_code] = agreed_failure(config);
  config.setting_names = {{"epochs", "--epochs"}};
  const auto [caller_words, caller_code] = agreed_failure(config);

  TrainerConfig resume;
  resume.loader.data_path = config.loader.data_path;
  resume.resume = true;
  const std::string needs_path = agreed_failure(resume).first;
  TrainerConfig reweight;
  reweight.loader.data_path = config.loader.data_path;
  reweight.reweight_every = 1;
  reweight.setting_names = {{"reweight_every", "reweight_every="}};
  const std::string needs_weights = agreed_failure(reweight).first;

  REQUIRE_ON_ALL_RANKS(library_words == "TrainerConfig::epochs must be >= 1, got 0");
  REQUIRE_ON_ALL_RANKS(library_code == 2);
  REQUIRE_ON_ALL_RANKS(caller_words == "--epochs must be >= 1, got 0");
  REQUIRE_ON_ALL_RANKS(caller_code == 2);
  REQUIRE_ON_ALL_RANKS(needs_path ==
                       "TrainerConfig::resume and TrainerConfig::checkpoint_every need TrainerConfig::checkpoint_path");
  REQUIRE_ON_ALL_RANKS(needs_weights ==
                       "reweight_every= needs a sampler with class weights (weighted), not --sampler distributed");
}

TEST_CASE("trainer: the steps are the sampler's plan; a resumed run continues them exactly", "[mpi][trainer]") {
  const Communicator& comm = world();
  const DefaultSignalsAfterwards restore_signals;
  std::string base = comm.is_root() ? "/tmp/strider_trainer_" + std::to_string(getpid()) : "";
  comm.broadcast(base);
  const std::int64_t samples = 150;
  SyntheticOptions data;
  data.samples = samples;
  data.classes = 3;
  data.dim = 4;
  data.seed = 3;
  data.progress = false;
  write_synthetic_dataset(comm, base + ".h5", data);

  TrainerConfig config;
  config.loader.data_path = base + ".h5";
  config.loader.sampler.batch_size = 8;
  config.loader.seed = 5;
  config.backend = "cpu";
  config.epochs = 2;
  config.learning_rate = 0.05f;
  config.step_timeout_seconds = 0;
  config.trace_path = base + ".full";
  const TrainSummary full = train(comm, config);

  // The oracle: the distributed sampler built by hand from the same options.
  SamplerOptions sampling;
  sampling.mode = "distributed";
  sampling.batch_size = 8;
  sampling.seed = 5;
  sampling.dataset_size = samples;
  const std::unique_ptr<Sampler> sampler = make_sampler(sampling, comm.size(), comm.rank());
  std::vector<std::string> expected;
  std::vector<std::int64_t> steps, trained;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    sampler->set_epoch(epoch);
    steps.push_back(sampler->num_steps());
    std::int64_t count = 0;
    std::vector<std::int64_t> indices;
    for (std::int64_t step = 0; step < sampler->num_steps(); ++step) {
      sampler->batch(step, indices);
      std::ostringstream line;
      line << epoch << ' ' << step;
      for (std::int64_t index : indices) line << ' ' << index;
      expected.push_back(line.str());
      count += static_cast<std::int64_t>(indices.size());
    }
    trained.push_back(comm.all_reduce(count, ReduceOp::sum));
  }
  const bool trace_ok = trace_lines(config.trace_path) == expected;
  // Epoch 0 alone with a checkpoint at its end, then resumed to 2 epochs: epoch 1 alone is trained,
  // on the same samples and from the same model, so its loss is the uninterrupted run's.
  TrainerConfig first = config;
  first.epochs = 1;
  first.trace_path = base + ".cut";
  first.checkpoint_path = base + ".ckpt";
  train(comm, first);
  TrainerConfig resumed = first;
  resumed.epochs = 2;
  resumed.resume = true;
  const TrainSummary second = train(comm, resumed);
  const bool resumed_trace_ok = trace_lines(first.trace_path) == expected;

  // A stop signal on rank 0 only, already there when training starts: every rank stops after step 0
  // and checkpoints there; the resumed run trains the rest of epoch 0, then epoch 1 as before.
  install_stop_signal_handlers();
  if (comm.is_root()) std::raise(SIGUSR1);
  TrainerConfig stopping = config;
  stopping.trace_path = base + ".stop";
  stopping.checkpoint_path = base + ".ckpt";
  const TrainSummary stopped = train(comm, stopping);
  clear_stop_signal();
  TrainerConfig restarted = stopping;
  restarted.resume = true;
  const TrainSummary rest = train(comm, restarted);
  const bool stopped_trace_ok = trace_lines(stopping.trace_path) == expected;
  comm.barrier();
  std::remove((base + ".full.rank" + std::to_string(comm.rank())).c_str());
  std::remove((base + ".cut.rank" + std::to_string(comm.rank())).c_str());
  std::remove((base + ".stop.rank" + std::to_string(comm.rank())).c_str());
  if (comm.is_root()) {
    std::remove((base + ".h5").c_str());
    std::remove((base + ".ckpt").c_str());
  }

  REQUIRE_ON_ALL_RANKS(trace_ok);
  REQUIRE_ON_ALL_RANKS(full.epochs.size() == 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    REQUIRE_ON_ALL_RANKS(full.epochs[e].epoch == static_cast<std::int64_t>(e));
    REQUIRE_ON_ALL_RANKS(full.epochs[e].steps == steps[e]);
    REQUIRE_ON_ALL_RANKS(full.epochs[e].samples == trained[e]);
  }
  REQUIRE_ON_ALL_RANKS(full.eval_samples == samples);
  REQUIRE_ON_ALL_RANKS(!full.preempted);
  REQUIRE_ON_ALL_RANKS(full.backend == "cpu");
  REQUIRE_ON_ALL_RANKS(full.seed == 5);
  REQUIRE_ON_ALL_RANKS(full.ranks.size() == static_cast<std::size_t>(comm.size()));
  // Resumed at epoch 0's end: epoch 1 alone, the same loss and evaluation.
  REQUIRE_ON_ALL_RANKS(resumed_trace_ok);
  REQUIRE_ON_ALL_RANKS(second.epochs.size() == 1u);
  REQUIRE_ON_ALL_RANKS(second.epochs[0].epoch == 1);
  REQUIRE_ON_ALL_RANKS(second.epochs[0].loss == full.epochs[1].loss);
  REQUIRE_ON_ALL_RANKS(second.eval_accuracy == full.eval_accuracy);
  // Stopped after step 0 by a signal on rank 0 only, then resumed at step 1.
  REQUIRE_ON_ALL_RANKS(stopped.preempted);
  REQUIRE_ON_ALL_RANKS(stopped.epochs.size() == 1u);
  REQUIRE_ON_ALL_RANKS(stopped.epochs[0].steps == 1);
  REQUIRE_ON_ALL_RANKS(stopped_trace_ok);
  REQUIRE_ON_ALL_RANKS(rest.epochs.size() == 2u);
  REQUIRE_ON_ALL_RANKS(rest.epochs[0].steps == steps[0] - 1);
  REQUIRE_ON_ALL_RANKS(rest.epochs[1].loss == full.epochs[1].loss);
}

TEST_CASE("trainer: R ranks of batch b train as one rank of batch R*b; a resume on other data is refused",
          "[mpi][trainer]") {
  const Communicator& comm = world();
  const DefaultSignalsAfterwards restore_signals;
  std::string base = comm.is_root() ? "/tmp/strider_trainer_batch_" + std::to_string(getpid()) : "";
  comm.broadcast(base);
  // 120 samples: every world size of 1..4 splits them without padding, so that step k of R ranks
  // (rank r: positions r, r+R, ... of the epoch's order) covers the positions of the single rank's
  // step k, and the mean gradient of a step is the same; only the order of the float sums differs.
  SyntheticOptions data;
  data.samples = 120;
  data.classes = 3;
  data.dim = 4;
  data.seed = 7;
  data.progress = false;
  write_synthetic_dataset(comm, base + ".h5", data);
  const std::vector<std::int64_t> class_samples = synthetic_class_counts(data);
  data.samples = 126;  // another dataset: the fingerprint covers the labels, the shape and the count
  write_synthetic_dataset(comm, base + ".other.h5", data);

  TrainerConfig config;
  config.loader.data_path = base + ".h5";
  config.loader.sampler.batch_size = 5;
  config.loader.seed = 9;
  config.backend = "cpu";
  config.epochs = 2;
  config.learning_rate = 0.2f;
  config.momentum = 0.5f;
  config.step_timeout_seconds = 0;
  config.checkpoint_path = base + ".ckpt";
  const TrainSummary spread = train(comm, config);
  // Resumed on the other file: its fingerprint differs from the checkpoint's.
  TrainerConfig other = config;
  other.loader.data_path = base + ".other.h5";
  other.epochs = 3;
  other.resume = true;
  const std::string refused = agreed_failure(other).first;

  // The same training by rank 0 alone, with the world's global batch.
  double solo_loss[2] = {0.0, 0.0};
  std::int64_t solo_steps[2] = {0, 0};
  MPI_Comm split = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_split(comm.native(), comm.is_root() ? 0 : MPI_UNDEFINED, 0, &split) == MPI_SUCCESS);
  if (comm.is_root()) {
    {
      const Communicator solo = Communicator::duplicate(split);
      TrainerConfig alone = config;
      alone.loader.sampler.batch_size = 5 * comm.size();
      alone.checkpoint_path.clear();
      const TrainSummary summary = train(solo, alone);
      for (std::size_t e = 0; e < 2 && e < summary.epochs.size(); ++e) {
        solo_loss[e] = summary.epochs[e].loss;
        solo_steps[e] = summary.epochs[e].steps;
      }
    }
    MPI_Comm_free(&split);
  }
  comm.broadcast(solo_loss, 2);
  comm.broadcast(solo_steps, 2);
  comm.barrier();
  if (comm.is_root()) {
    for (const char* suffix : {".h5", ".other.h5", ".ckpt"}) std::remove((base + suffix).c_str());
  }

  REQUIRE_ON_ALL_RANKS(spread.epochs.size() == 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    CAPTURE(e, spread.epochs[e].loss, solo_loss[e]);
    REQUIRE_ON_ALL_RANKS(spread.epochs[e].steps == 120 / (5 * comm.size()));
    REQUIRE_ON_ALL_RANKS(spread.epochs[e].steps == solo_steps[e]);
    REQUIRE_ON_ALL_RANKS(spread.epochs[e].samples == 120);
    // Float sums in another order: equal to about 1e-6; a gradient or a loss divided by one
    // rank's samples instead of the step's would differ by far more.
    REQUIRE_ON_ALL_RANKS(spread.epochs[e].loss == Approx(solo_loss[e]).epsilon(1e-4));
    // Every sample once per epoch: class k's recall x its samples is its right predictions over all
    // ranks, and they add up to the epoch's accuracy x samples (one rank's counts alone would not).
    const std::vector<double>& recall = spread.epochs[e].per_class_recall;
    REQUIRE_ON_ALL_RANKS(recall.size() == class_samples.size());
    double correct = 0.0;
    for (std::size_t k = 0; k < recall.size() && k < class_samples.size(); ++k) {
      REQUIRE_ON_ALL_RANKS((recall[k] >= 0.0 && recall[k] <= 1.0));
      const double right = recall[k] * static_cast<double>(class_samples[k]);
      REQUIRE_ON_ALL_RANKS(std::abs(right - std::round(right)) < 1e-9);
      correct += right;
    }
    REQUIRE_ON_ALL_RANKS(std::llround(correct) == std::llround(spread.epochs[e].accuracy * 120.0));
  }
  REQUIRE_ON_ALL_RANKS(refused.find("was written for another dataset") != std::string::npos);
}

TEST_CASE("trainer: an epoch's per-class recall is over the per-class counts of every rank", "[mpi][trainer]") {
  const Communicator& comm = world();
  const auto ranks = static_cast<std::int64_t>(comm.size());
  // Rank r trained 4 samples of class 0 (3 right), 1 + r of class 1 (r right) and none of class 2.
  detail::EpochTotals totals;
  totals.samples_per_class = {4, 1 + comm.rank(), 0};
  totals.correct_per_class = {3, comm.rank(), 0};
  totals.count = 5 + comm.rank();
  totals.correct = 3 + comm.rank();
  const EpochSummary summary = detail::summarize_epoch(comm, 0, 0, totals, 1.0, 0.0, {});
  // Summed by hand over R ranks: class 0 3R / 4R; class 1 R(R-1)/2 / (R + R(R-1)/2); class 2 none.
  const double class1_right = static_cast<double>(ranks * (ranks - 1) / 2);
  REQUIRE(summary.per_class_recall.size() == 3u);
  REQUIRE(summary.per_class_recall[0] == 0.75);
  REQUIRE(summary.per_class_recall[1] == class1_right / (static_cast<double>(ranks) + class1_right));
  REQUIRE(std::isnan(summary.per_class_recall[2]));
  REQUIRE(summary.accuracy == static_cast<double>(3 * ranks + ranks * (ranks - 1) / 2) /
                                  static_cast<double>(5 * ranks + ranks * (ranks - 1) / 2));
  // Without per-class counts (no classes) there is no per-class recall.
  const EpochSummary no_classes = detail::summarize_epoch(comm, 0, 0, detail::EpochTotals{}, 1.0, 0.0, {});
  REQUIRE(no_classes.per_class_recall.empty());
}
