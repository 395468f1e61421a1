#include "strider/train/trainer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/test_hooks.hpp"
#include "strider/comm/seed.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/core/log.hpp"
#include "strider/device/backend.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/exact_split_sampler.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/train/batch_input.hpp"
#include "strider/train/checkpoint.hpp"
#include "strider/train/fingerprint.hpp"
#include "strider/train/metrics.hpp"
#include "strider/train/model.hpp"
#include "strider/train/stop_signal.hpp"
#include "strider/train/watchdog.hpp"
#include "train/class_reweighting.hpp"

namespace strider {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// A non-owning shared_ptr (the prefetcher owns the vector and outlives every sampler).
template <typename T>
std::shared_ptr<const T> borrow(const T& value) {
  return std::shared_ptr<const T>(std::shared_ptr<void>(), &value);
}

/// The trace file of this rank: "epoch step id id ..." per trained step. A resumed run first drops
/// the lines at or after the resume point.
class TraceWriter {
 public:
  TraceWriter() = default;
  TraceWriter(const std::string& base, int rank, std::int64_t resume_epoch, std::int64_t resume_step, bool resuming) {
    path_ = base + ".rank" + std::to_string(rank);
    std::string kept;
    if (resuming) {
      std::ifstream old(path_);
      std::string line;
      while (std::getline(old, line)) {
        std::istringstream fields(line);
        std::int64_t epoch = -1, step = -1;
        if (!(fields >> epoch >> step)) continue;
        if (epoch < resume_epoch || (epoch == resume_epoch && step < resume_step)) kept += line + "\n";
      }
    }
    file_.open(path_, std::ios::trunc);
    if (!file_) STRIDER_THROW(SystemError, "cannot write the sample trace '" + path_ + "'");
    file_ << kept;
  }
  void write(std::int64_t epoch, std::int64_t step, const std::vector<std::int64_t>& indices) {
    if (!file_.is_open()) return;
    file_ << epoch << ' ' << step;
    for (std::int64_t index : indices) file_ << ' ' << index;
    file_ << '\n';
  }
  void flush() {
    if (file_.is_open()) file_.flush();
  }

 private:
  std::string path_;
  std::ofstream file_;
};

std::string join_numbers(const std::vector<double>& values) {
  std::ostringstream text;
  text << std::setprecision(17);
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
  return text.str();
}

std::vector<double> split_numbers(const std::string& text) {
  std::vector<double> values;
  std::istringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(std::stod(item));
  return values;
}

std::string format_recall(const std::vector<double>& recall) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(3);
  for (std::size_t c = 0; c < recall.size(); ++c) text << (c ? " " : "") << c << ":" << recall[c];
  return text.str();
}

/// Size and modification time of a file: a cheap check that the training data did not change.
std::pair<std::int64_t, std::int64_t> file_state(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {-1, -1};
  return {static_cast<std::int64_t>(info.st_size),
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
}

/// Everything a run carries between epochs.
class TrainingRun {
 public:
  TrainingRun(const Communicator& comm, const TrainerConfig& config) : comm_(comm), config_(config) {}

  TrainSummary run();

 private:
  void open_data();
  void build_backend();
  void check_data_unchanged();
  void rebuild_sampler();
  bool try_resume();
  void save_checkpoint();
  bool train_epoch();  // false: preempted
  void evaluate();
  void collect_rank_summaries();

  const Communicator& comm_;
  TrainerConfig config_;
  TrainSummary summary_;
  std::unique_ptr<BatchReader> reader_;  // opened by open_data, handed to the prefetcher by build_backend
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<Backend> backend_;
  bool stage_next_ = false;                                // stage the next batch's host-to-device copy during a step
  std::pair<std::int64_t, std::int64_t> data_file_state_;  // size and mtime when opened
  std::unique_ptr<Sampler> sampler_;
  std::uint64_t fingerprint_ = 0;
  int num_classes_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t first_step_ = 0;   // where the current epoch starts (resume)
  std::int64_t steps_done_ = 0;   // steps finished in the current epoch
  std::int64_t global_step_ = 0;  // steps finished over the run (for --checkpoint-every)
  bool resumed_ = false;
  TraceWriter trace_;
  std::unique_ptr<StepWatchdog> watchdog_;
  double rank_wall_seconds_ = 0.0;
  // Test-only (core/test_hooks.hpp): STRIDER_TEST_STEP_DELAY_US slows every step, so that tests can
  // signal a run mid-epoch; STRIDER_TEST_HANG_AT makes this rank hang in a step (the watchdog's test).
  detail::TestHooks test_hooks_ = detail::test_hooks();
};

void TrainingRun::open_data() {
  ReaderOptions reader = config_.reader;
  reader.require_labels = true;  // training needs labels whatever the sampling mode
  // Held in memory only for samplers whose plan needs them all; otherwise each batch brings its own,
  // so that a streaming run's memory does not grow with N.
  reader.labels_in_memory = sampler_needs_labels(config_.sampler.mode);
  auto opened = open_reader(comm_, config_.data_path, reader);
  comm_.collective_try([&] {
    if (opened->info().num_samples < comm_.size())
      STRIDER_THROW(UsageError, "the dataset has " + std::to_string(opened->info().num_samples) +
                                    " samples, fewer than the " + std::to_string(comm_.size()) + " ranks");
  });
  // Rank 0 streams every label once (fingerprint, class count, value checks) and broadcasts.
  std::int32_t max_label = 0;
  comm_.collective_try([&] {
    if (!comm_.is_root()) return;
    const DatasetInfo& info = opened->info();
    fingerprint_ = dataset_fingerprint(
        info, info.has_labels ? info.num_samples : 0,
        [&](std::int64_t first, std::int64_t count, std::int32_t* out) { opened->read_labels(first, count, out); },
        opened->lengths(), reader.keys, &max_label);
  });
  comm_.broadcast(&fingerprint_, 1);
  comm_.broadcast(&max_label, 1);
  num_classes_ = std::max(2, static_cast<int>(max_label) + 1);
  if (comm_.is_root())
    log_info("training on ", config_.data_path, ": ", opened->info().num_samples, " samples, ", num_classes_,
             " classes, engine ", opened->engine());
  reader_ = std::move(opened);
  data_file_state_ = file_state(config_.data_path);
}

void TrainingRun::check_data_unchanged() {
  comm_.collective_try([&] {
    if (file_state(config_.data_path) != data_file_state_)
      STRIDER_THROW(DataError, config_.data_path +
                                   " changed during training (its size or modification time differs from "
                                   "when it was opened); refusing to train on data that no longer matches");
  });
}

void TrainingRun::build_backend() {
  std::string why;
  backend_ = comm_.collective_try([&] { return make_backend(config_.backend, comm_, &why); });
  // Every rank must run the same backend (the gradient all-reduce differs): agree on it.
  Fnv1a64 kind;
  kind.add(backend_->name());
  const std::uint64_t here = kind.value();
  if (comm_.all_reduce(here, ReduceOp::min) != comm_.all_reduce(here, ReduceOp::max))
    STRIDER_THROW(UsageError,
                  "some ranks found a working GPU and others did not; pass --backend cpu or fix the GPU binding");
  summary_.backend = backend_->name();
  if (comm_.is_root()) log_info(why);
  ModelConfig model = config_.model;
  model.num_classes = num_classes_;
  model.seed = summary_.seed;
  comm_.collective_try([&] { backend_->initialize(resolve_model_config(model, reader_->info())); });
  // Surface a shared GPU or an NCCL failure now, agreed, rather than in the first all-reduce.
  comm_.collective_try([&] { backend_->connect(comm_); });
  // The ring's buffers in the memory the backend copies from fastest (pinned for a GPU). With at
  // least two buffers and a backend that overlaps copies, the next batch's copy is staged while a
  // step runs.
  const int depth =
      prefetch_depth(config_.prefetch, reader_->info(), config_.sampler.batch_size, config_.sampler.max_tokens);
  stage_next_ = backend_->overlaps_copies() && depth >= 2;
  prefetcher_ = std::make_unique<Prefetcher>(std::move(reader_), PrefetcherOptions{depth, backend_->host_allocator()});
}

void TrainingRun::rebuild_sampler() {
  SamplerOptions options = config_.sampler;
  options.dataset_size = prefetcher_->dataset().num_samples;
  options.seed = summary_.seed;
  options.labels = borrow(prefetcher_->labels());
  if (prefetcher_->dataset().variable_length) options.lengths = borrow(prefetcher_->lengths());
  sampler_ = comm_.collective_try([&] { return make_sampler(options, comm_.size(), comm_.rank()); });
}

bool TrainingRun::try_resume() {
  if (!config_.resume || config_.checkpoint_path.empty()) return false;
  const bool exists = checkpoint_exists(config_.checkpoint_path);
  if (comm_.all_reduce(exists ? 1 : 0, ReduceOp::min) == 0) {
    if (comm_.all_reduce(exists ? 1 : 0, ReduceOp::max) == 1)
      STRIDER_THROW(UsageError, "checkpoint " + config_.checkpoint_path +
                                    " is visible on some ranks only; put it on a shared file system");
    if (comm_.is_root()) log_info("--resume: no checkpoint at ", config_.checkpoint_path, "; starting fresh");
    return false;
  }
  comm_.collective_try([&] {
    const Checkpoint checkpoint = read_checkpoint(config_.checkpoint_path);
    if (checkpoint.field("dataset.fingerprint") != fingerprint_hex(fingerprint_))
      STRIDER_THROW(UsageError, "checkpoint " + config_.checkpoint_path +
                                    " was written for another dataset (fingerprint " +
                                    checkpoint.field("dataset.fingerprint") + ", this data has " +
                                    fingerprint_hex(fingerprint_) + ")");
    const SamplerState state = SamplerState::parse(checkpoint.field("sampler.state"));
    if (state.mode != config_.sampler.mode)
      STRIDER_THROW(UsageError, "checkpoint " + config_.checkpoint_path + " was written with --sampler " + state.mode +
                                    ", this run uses --sampler " + config_.sampler.mode);
    if (!config_.seed) summary_.seed = state.seed;
    if (checkpoint.fields.count("sampler.class_weights"))
      config_.sampler.class_weights = split_numbers(checkpoint.field("sampler.class_weights"));
    load_model(checkpoint, *backend_);
    rebuild_sampler();  // local: the options are the same on every rank
    first_step_ = sampler_->resume(state);
    epoch_ = state.epoch;
    global_step_ = std::stoll(checkpoint.field("run.global_step"));
  });
  if (comm_.is_root())
    log_info("resumed from ", config_.checkpoint_path, " at epoch ", epoch_, " step ", first_step_, " (world size ",
             comm_.size(), ")");
  return true;
}

void TrainingRun::save_checkpoint() {
  if (config_.checkpoint_path.empty()) return;
  if (watchdog_) watchdog_->pause();
  comm_.collective_try([&] {
    if (!comm_.is_root()) return;
    Checkpoint checkpoint;
    checkpoint.fields["sampler.state"] = sampler_->state(steps_done_).serialize();
    checkpoint.fields["sampler.mode"] = sampler_->mode();
    if (!config_.sampler.class_weights.empty())
      checkpoint.fields["sampler.class_weights"] = join_numbers(config_.sampler.class_weights);
    checkpoint.fields["dataset.fingerprint"] = fingerprint_hex(fingerprint_);
    checkpoint.fields["run.global_step"] = std::to_string(global_step_);
    checkpoint.fields["run.world_size"] = std::to_string(comm_.size());
    checkpoint.fields["run.seed"] = std::to_string(summary_.seed);
    save_model(*backend_, checkpoint);
    write_checkpoint(config_.checkpoint_path, checkpoint);
  });
  if (comm_.is_root())
    log_info("checkpoint written: epoch ", sampler_->epoch(), " step ", steps_done_, " -> ", config_.checkpoint_path);
}

bool TrainingRun::train_epoch() {
  const Clock::time_point epoch_start = Clock::now();
  const PrefetchStats before = prefetcher_->stats();
  const std::int64_t steps = sampler_->num_steps();
  const auto all_steps = comm_.all_gather(steps);
  for (std::int64_t count : all_steps)
    if (count != steps)
      STRIDER_THROW(Error, "ranks disagree on the number of steps in epoch " + std::to_string(epoch_) +
                               " (a sampler bug): collectives would hang");
  prefetcher_->start_epoch(*sampler_, first_step_);

  double loss_sum = 0.0;
  std::int64_t correct = 0, count = 0;
  double tokens[2] = {0.0, 0.0};  // sequences: real tokens, padded tokens (count * longest row)
  bool preempted = false;
  std::optional<Batch> upcoming;  // the next step's batch, already staged on the device
  for (std::int64_t step = first_step_; step < steps; ++step) {
    if (watchdog_) watchdog_->step_started(epoch_, step);
    StepResult local;
    comm_.collective_try([&] {
      std::optional<Batch> batch = upcoming ? std::move(upcoming) : prefetcher_->next();
      upcoming.reset();
      if (!batch) STRIDER_THROW(Error, "the prefetcher ended before step " + std::to_string(step));
      if (stage_next_ && step + 1 < steps) {  // the copy of batch k+1 overlaps step k
        upcoming = prefetcher_->next();
        if (upcoming) backend_->stage(batch_input(*upcoming, prefetcher_->dataset()));
      }
      trace_.write(epoch_, step, batch->indices());
      if (batch->offsets() != nullptr) {
        std::int64_t longest = 0;
        for (std::int64_t i = 0; i < batch->size(); ++i)
          longest = std::max(longest, batch->offsets()[i + 1] - batch->offsets()[i]);
        tokens[0] += static_cast<double>(batch->offsets()[batch->size()]);
        tokens[1] += static_cast<double>(longest * batch->size());
      }
      local = backend_->forward_backward(batch_input(*batch, prefetcher_->dataset()));
      if (step == test_hooks_.hang_step)  // test-only: this rank never finishes the step (a stuck read or peer)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (test_hooks_.step_delay_us > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(test_hooks_.step_delay_us));
    });
    std::int64_t shared[2] = {local.count, stop_signal_received() ? 1 : 0};
    comm_.all_reduce(shared, 2, ReduceOp::sum);
    backend_->all_reduce_gradients(comm_, shared[0]);
    backend_->apply_sgd(config_.learning_rate, config_.momentum);
    loss_sum += local.loss_sum;
    correct += local.correct;
    count += local.count;
    steps_done_ = step + 1;
    ++global_step_;
    if (shared[1] > 0) {  // a stop signal reached some rank: every rank stops after this same step
      preempted = true;
      break;
    }
    if (config_.checkpoint_every > 0 && global_step_ % config_.checkpoint_every == 0) save_checkpoint();
  }
  if (watchdog_) watchdog_->pause();
  prefetcher_->stop();
  trace_.flush();

  const double seconds = seconds_since(epoch_start);
  const PrefetchStats after = prefetcher_->stats();
  double sums[4] = {loss_sum, static_cast<double>(correct), tokens[0], tokens[1]};
  comm_.all_reduce(sums, 4, ReduceOp::sum);
  const std::int64_t global_count = comm_.all_reduce(count, ReduceOp::sum);
  const double stall = seconds > 0 ? (after.stall_seconds - before.stall_seconds) / seconds : 0.0;
  EpochSummary epoch;
  epoch.epoch = epoch_;
  epoch.samples = global_count;
  epoch.steps = steps_done_ - first_step_;
  epoch.seconds = comm_.all_reduce(seconds, ReduceOp::max);
  epoch.loss = global_count > 0 ? sums[0] / static_cast<double>(global_count) : 0.0;
  epoch.accuracy = global_count > 0 ? sums[1] / static_cast<double>(global_count) : 0.0;
  epoch.samples_per_s = epoch.seconds > 0 ? static_cast<double>(global_count) / epoch.seconds : 0.0;
  epoch.stall_fraction = comm_.all_reduce(stall, ReduceOp::max);
  epoch.class_weights = config_.sampler.class_weights;
  epoch.padding_efficiency = sums[3] > 0 ? sums[2] / sums[3] : 1.0;
  summary_.epochs.push_back(epoch);
  rank_wall_seconds_ += seconds;
  if (comm_.is_root()) {
    std::ostringstream line;
    line << std::fixed << "epoch " << epoch_ + 1 << "/" << config_.epochs << (preempted ? " (stopped)" : "")
         << ": loss " << std::setprecision(4) << epoch.loss << " accuracy " << std::setprecision(3) << epoch.accuracy
         << " samples/s " << std::setprecision(0) << epoch.samples_per_s << " stall " << std::setprecision(1)
         << 100.0 * epoch.stall_fraction << "% (" << epoch.steps << " steps, " << std::setprecision(2) << epoch.seconds
         << " s)";
    if (prefetcher_->dataset().variable_length)
      line << " padding efficiency " << std::setprecision(3) << epoch.padding_efficiency;
    print_on_root(line.str());
  }
  return !preempted;
}

void TrainingRun::evaluate() {
  const Clock::time_point start = Clock::now();
  ReaderOptions reader = config_.reader;
  reader.require_labels = true;
  reader.labels_in_memory = false;  // evaluation needs each batch's labels only
  const std::string path = config_.eval_path.empty() ? config_.data_path : config_.eval_path;
  Prefetcher eval(open_reader(comm_, path, reader), PrefetcherOptions{2, nullptr});
  ClassCounts counts(num_classes_);
  ExactSplitSampler plan(eval.dataset().num_samples, std::max<std::int64_t>(config_.eval_batch_size, 1), comm_.size(),
                         comm_.rank());
  comm_.collective_try([&] {
    if (!config_.eval_path.empty()) {
      ModelConfig check = backend_->config();
      check.kind = backend_->config().kind;
      resolve_model_config(check, eval.dataset());  // the evaluation file must fit the model
    }
    std::vector<std::int32_t> predictions;
    eval.start_epoch(plan);
    while (auto batch = eval.next()) {
      predictions.resize(static_cast<std::size_t>(batch->size()));
      backend_->predict(batch_input(*batch, eval.dataset()), predictions.data());
      for (std::int64_t i = 0; i < batch->size(); ++i)
        if (batch->labels()[i] < 0 || batch->labels()[i] >= num_classes_)
          STRIDER_THROW(DataError, "evaluation label " + std::to_string(batch->labels()[i]) + " of sample " +
                                       std::to_string(batch->indices()[static_cast<std::size_t>(i)]) +
                                       " is outside the training classes 0.." + std::to_string(num_classes_ - 1));
      counts.add(batch->labels(), predictions.data(), batch->size());
    }
  });
  counts.all_reduce(comm_);
  summary_.per_class_recall = counts.recall();
  summary_.eval_accuracy = counts.accuracy();
  summary_.eval_samples = counts.total();
  if (counts.total() != eval.dataset().num_samples)
    STRIDER_THROW(Error, "evaluation counted " + std::to_string(counts.total()) + " samples of " +
                             std::to_string(eval.dataset().num_samples));
  if (comm_.is_root()) {
    std::ostringstream line;
    line << std::fixed << std::setprecision(3) << "evaluation on " << path << ": accuracy " << counts.accuracy()
         << " over " << counts.total() << " samples (" << std::setprecision(2) << seconds_since(start)
         << " s); per-class recall " << format_recall(summary_.per_class_recall);
    print_on_root(line.str());
  }
}

void TrainingRun::collect_rank_summaries() {
  const PrefetchStats stats = prefetcher_->stats();
  RankSummary mine;
  mine.rank = comm_.rank();
  mine.stall_seconds = stats.stall_seconds;
  mine.io_seconds = stats.io_seconds;
  mine.wall_seconds = rank_wall_seconds_;
  mine.bytes_read = stats.bytes_read;
  mine.samples = stats.samples;
  summary_.ranks = comm_.all_gather(mine);
}

TrainSummary TrainingRun::run() {
  comm_.collective_try([&] {
    if (config_.epochs < 1) STRIDER_THROW(UsageError, "--epochs must be >= 1, got " + std::to_string(config_.epochs));
    if (!(config_.learning_rate > 0) || !std::isfinite(config_.learning_rate))
      STRIDER_THROW(UsageError, "--lr must be a positive number");
    if (config_.checkpoint_every < 0) STRIDER_THROW(UsageError, "--checkpoint-every must be >= 0");
    if (config_.prefetch < 0 || config_.prefetch > kMaxPrefetchDepth)
      STRIDER_THROW(UsageError, "--prefetch must be in 0.." + std::to_string(kMaxPrefetchDepth) + " (0: auto), got " +
                                    std::to_string(config_.prefetch));
    if (config_.reweight_every < 0) STRIDER_THROW(UsageError, "--reweight-every must be >= 0");
    if ((config_.resume || config_.checkpoint_every > 0) && config_.checkpoint_path.empty())
      STRIDER_THROW(UsageError, "--resume and --checkpoint-every need --checkpoint PATH");
    if (config_.reweight_every > 0 && !detail::sampler_supports_reweighting(config_.sampler.mode))
      STRIDER_THROW(UsageError, "--reweight-every needs a sampler with class weights (weighted), not --sampler " +
                                    config_.sampler.mode);
  });
  install_stop_signal_handlers();
  summary_.seed = agree_on_seed(comm_, config_.seed);
  open_data();
  build_backend();
  resumed_ = try_resume();
  if (!resumed_) rebuild_sampler();
  comm_.collective_try([&] {
    if (!config_.trace_path.empty())
      trace_ = TraceWriter(config_.trace_path, comm_.rank(), epoch_, first_step_, resumed_);
  });
  watchdog_ = std::make_unique<StepWatchdog>(config_.step_timeout_seconds);

  for (; epoch_ < config_.epochs; ++epoch_) {
    check_data_unchanged();
    if (!resumed_ || first_step_ == 0) sampler_->set_epoch(epoch_);
    if (first_step_ < sampler_->num_steps()) {
      steps_done_ = first_step_;
      if (!train_epoch()) {
        save_checkpoint();
        summary_.preempted = true;
        collect_rank_summaries();
        if (comm_.is_root())
          print_on_root("stopped by a signal; checkpoint written, exiting with status 75 to be requeued");
        return summary_;
      }
    }
    first_step_ = 0;
    resumed_ = false;
    const bool reweight_due =
        config_.reweight_every > 0 && (epoch_ + 1) % config_.reweight_every == 0 && epoch_ + 1 < config_.epochs;
    if (reweight_due) {
      evaluate();
      config_.sampler.class_weights = detail::agree_on_new_class_weights(
          comm_, config_.sampler.class_weights, prefetcher_->labels(), summary_.per_class_recall);
      rebuild_sampler();
      sampler_->set_epoch(epoch_);
      if (comm_.is_root()) print_on_root("class weights now " + join_numbers(config_.sampler.class_weights));
    }
    steps_done_ = sampler_->num_steps();
    if (epoch_ + 1 < config_.epochs) {
      // The epoch is complete: a checkpoint now resumes at the start of the next one.
      if (!config_.checkpoint_path.empty() && config_.checkpoint_every == 0) save_checkpoint();
    }
  }
  save_checkpoint();
  evaluate();
  if (comm_.is_root()) print_on_root("per-class recall: " + format_recall(summary_.per_class_recall));
  collect_rank_summaries();
  return summary_;
}

}  // namespace

TrainSummary train(const Communicator& comm, const TrainerConfig& config) {
  return TrainingRun(comm, config).run();
}

}  // namespace strider
