// train() at 1..4 ranks, called as a library: settings refused in the caller's words, the steps
// trained are exactly the sampler's plan (each rank's sample trace against a sampler built by hand),
// evaluation counts every sample once, and a run resumed from a checkpoint (an epoch's end, or the
// step where a stop signal ended it) continues with the same samples and the same loss. Every check is agreed across
// ranks before it is asserted.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "mpi_test_support.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/train/stop_signal.hpp"
#include "strider/train/trainer.hpp"

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
