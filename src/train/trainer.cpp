// strider-train's run as a library call: the order of things and what is carried between epochs.
// The pieces live beside it: the steps (training_loop), evaluation, the checkpoint's contents
// (run_checkpoint), the printed lines (report), the JSON summary (summary), the sample trace and
// the watchdog.
#include "strider/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "core/test_hooks.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/core/progress.hpp"
#include "strider/device/backend.hpp"
#include "strider/device/gpu_binding.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/train/fingerprint.hpp"
#include "strider/train/input_statistics.hpp"
#include "strider/train/metrics.hpp"
#include "strider/train/stop_signal.hpp"
#include "strider/train/watchdog.hpp"
#include "train/class_reweighting.hpp"
#include "train/evaluation.hpp"
#include "train/report.hpp"
#include "train/run_checkpoint.hpp"
#include "train/sample_trace.hpp"
#include "train/training_loop.hpp"

namespace strider {

std::string TrainerConfig::setting_name(std::string_view field) const {
  const auto named = setting_names.find(field);
  return named != setting_names.end() ? named->second : "TrainerConfig::" + std::string(field);
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Refuses settings that cannot work, naming them as the caller does (TrainerConfig::setting_name).
/// The Loader checks its own options.
void check_settings(const TrainerConfig& config) {
  const auto name = [&config](std::string_view field) { return config.setting_name(field); };
  if (config.epochs < 1)
    STRIDER_THROW(UsageError, name("epochs") + " must be >= 1, got " + std::to_string(config.epochs));
  if (!(config.learning_rate > 0) || !std::isfinite(config.learning_rate))
    STRIDER_THROW(UsageError, name("learning_rate") + " must be a positive number");
  if (config.checkpoint_every < 0) STRIDER_THROW(UsageError, name("checkpoint_every") + " must be >= 0");
  if (config.eval_batch_size < 1 || config.eval_batch_size > kMaxBatchSize)
    STRIDER_THROW(UsageError, name("eval_batch_size") + " must be in 1.." + std::to_string(kMaxBatchSize) + ", got " +
                                  std::to_string(config.eval_batch_size));
  if (config.reweight_every < 0) STRIDER_THROW(UsageError, name("reweight_every") + " must be >= 0");
  check_choice(config.model.kind, {"auto", "softmax", "mlp", "bag"}, name("model_kind"));
  check_choice(config.backend, {"auto", "cpu", "cuda"}, name("backend"));
  check_choice(config.channel_axis, {"auto", "1", "last"}, name("channel_axis"));
  const std::string& normalize = config.normalize;
  if (normalize != "none" && normalize != "auto" &&
      (normalize.size() < 5 || normalize.compare(normalize.size() - 5, 5, ".json") != 0))
    STRIDER_THROW(UsageError, name("normalize") + " must be none, auto or a FILE.json of strider-inspect stats, got '" +
                                  normalize + "'");
  if (!config.checkpoint_path.empty()) {
    const std::string option = name("checkpoint_path");
    check_output_path(config.checkpoint_path, option.substr(0, option.find(' ')));  // "--checkpoint PATH"
  }
  if ((config.resume || config.checkpoint_every > 0) && config.checkpoint_path.empty())
    STRIDER_THROW(UsageError, name("resume") + " and " + name("checkpoint_every") + " need " + name("checkpoint_path"));
  if (config.reweight_every > 0 && !detail::sampler_supports_reweighting(config.loader.sampler.mode))
    STRIDER_THROW(UsageError, name("reweight_every") +
                                  " needs a sampler with class weights (weighted), not --sampler " +
                                  config.loader.sampler.mode);
}

/// Everything a run carries between epochs.
class TrainingRun {
 public:
  TrainingRun(const Communicator& comm, const TrainerConfig& config)
      : comm_(comm), config_(config), hooks_(detail::test_hooks()) {}

  TrainSummary run();

 private:
  void build_backend();
  void log_device_binding() const;
  void open_loader();
  void build_model();
  /// The normalization of the inputs (--normalize), or none; warns about large unnormalized inputs.
  std::optional<Normalization> input_normalization();
  /// Whether the run resumes from a checkpoint (--resume and one exists on every rank; collective,
  /// asked once).
  bool checkpoint_to_resume();
  /// A resume without --seed takes the checkpoint's seed (a seed drawn now would refuse the resume).
  void take_checkpoint_seed();
  bool try_resume();
  /// at_next_epoch: the epoch just ended and its end-of-epoch work (re-weighting) is done, so the
  /// checkpoint resumes at the next epoch's first step rather than after this epoch's last one.
  void save_checkpoint(bool at_next_epoch = false);
  bool train_epoch(LoaderEpoch& epoch);  // false: stopped by a signal
  LoaderOptions evaluation_options() const;
  void evaluate();
  void reweight_classes();
  void collect_rank_summaries();
  void finish();

  const Communicator& comm_;
  TrainerConfig config_;
  detail::TestHooks hooks_;
  TrainSummary summary_;
  // Built in this order (the backend says where batches live; the model's shape comes from the
  // data) and destroyed in the reverse one.
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Loader> loader_;
  bool stage_next_ = false;            // stage the next batch's host-to-device copy during a step
  std::vector<double> class_weights_;  // in force (those given, or the last re-weighting's)
  std::uint64_t fingerprint_ = 0;
  int num_classes_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t steps_done_ = 0;   // steps finished in the current epoch
  std::int64_t global_step_ = 0;  // steps finished over the run (for checkpoint_every)
  std::int64_t resume_step_ = 0;  // where the resumed epoch starts (0: not resumed)
  std::optional<bool> checkpoint_to_resume_;
  detail::SampleTrace trace_;
  std::unique_ptr<StepWatchdog> watchdog_;
  double rank_wall_seconds_ = 0.0;
  bool unnormalized_inputs_ = false;   // large fixed-size inputs trained as stored (a divergence says so)
  bool warned_divergence_ = false;     // the epoch-end warning about a loss far above chance, given once
  ProgressReporter progress_;          // rank 0 with config.progress_seconds > 0
  std::int64_t progress_samples_ = 0;  // every rank's samples since the run began
  double stall_before_epoch_ = 0.0;    // this rank's stall in the run's earlier epochs
};

void TrainingRun::build_backend() {
  std::string why;
  backend_ = comm_.collective_try([&] { return make_backend(config_.backend, comm_, &why); });
  // Every rank must run the same backend (the gradient all-reduce differs): agree on it.
  Fnv1a64 kind;
  kind.add(backend_->name());
  const std::uint64_t here = kind.value();
  if (comm_.all_reduce(here, ReduceOp::min) != comm_.all_reduce(here, ReduceOp::max))
    STRIDER_THROW(UsageError, "some ranks found a working GPU and others did not; pass " +
                                  config_.setting_name("backend") + " cpu or fix the GPU binding");
  summary_.backend = backend_->name();
  if (comm_.is_root()) log_info(why);
  log_device_binding();
}

void TrainingRun::log_device_binding() const {
  // The GPU each rank binds by node-local rank, host by host (one line, on rank 0). On the CPU, the
  // GPU it would bind with one GPU per node-local rank: the binding is checkable without a GPU.
  const int device = backend_->device() >= 0 ? backend_->device() : comm_.local_rank();
  const unsigned char no_uuid[16] = {};
  const std::vector<DeviceIdentity> identities =
      comm_.all_gather(make_device_identity(this_host_name(), no_uuid, device));
  if (!comm_.is_root()) return;
  if (backend_->device() >= 0) {
    log_info("device binding by node-local rank: ", describe_device_binding(identities));
  } else {
    log_info("device binding by node-local rank (cpu backend: the GPU each rank would bind, one per node-local rank): ",
             describe_device_binding(identities));
  }
}

void TrainingRun::open_loader() {
  LoaderOptions options = config_.loader;
  options.reader.require_labels = true;  // training needs labels whatever the sampling mode
  options.reader.labels_needed_by = "training";
  options.allocator = backend_->host_allocator();  // pinned where the backend copies to a GPU
  options.epochs = config_.epochs;                 // nothing planned ahead past the last epoch
  // A backend that overlaps copies gets batch k+1 staged during step k: two batches held, so the
  // ring needs a third for the I/O thread to read ahead into.
  options.batches_held = backend_->overlaps_copies() ? 2 : 1;
  loader_ = std::make_unique<Loader>(comm_, std::move(options));
  if (config_.loader.prefetch > 0 && loader_->prefetch_depth() != config_.loader.prefetch && comm_.is_root())
    log_info("--prefetch ", config_.loader.prefetch, " raised to ", loader_->prefetch_depth(), ": the ",
             backend_->name(), " backend holds the next batch staged while a step runs");
  const DatasetInfo& info = loader_->dataset();
  comm_.collective_try([&] {
    if (info.num_samples < comm_.size())
      STRIDER_THROW(UsageError, "the dataset has " + std::to_string(info.num_samples) + " samples, fewer than the " +
                                    std::to_string(comm_.size()) + " ranks");
  });
  // Rank 0 streams every label once (fingerprint, class count, value checks) and broadcasts.
  std::int32_t max_label = 0;
  comm_.collective_try([&] {
    if (!comm_.is_root()) return;
    fingerprint_ = dataset_fingerprint(
        info, info.has_labels ? info.num_samples : 0,
        [&](std::int64_t first, std::int64_t count, std::int32_t* out) { loader_->read_labels(first, count, out); },
        loader_->lengths(), config_.loader.reader.keys, &max_label);
  });
  comm_.broadcast(&fingerprint_, 1);
  comm_.broadcast(&max_label, 1);
  comm_.collective_try([&] {
    if (max_label >= kMaxClasses)
      STRIDER_THROW(UsageError, "the labels of " + config_.loader.data_path + " run to " + std::to_string(max_label) +
                                    ", above the most classes the trainer takes (" + std::to_string(kMaxClasses) +
                                    "): labels must be class numbers 0..K-1");
  });
  num_classes_ = std::max(2, static_cast<int>(max_label) + 1);
  summary_.seed = loader_->seed();
  class_weights_ = config_.loader.sampler.class_weights;
  if (comm_.is_root())
    log_info("training on ", config_.loader.data_path, ": ", info.num_samples, " samples, ", num_classes_,
             " classes, engine ", loader_->engine());
}

void TrainingRun::build_model() {
  ModelConfig model = config_.model;
  model.num_classes = num_classes_;
  model.seed = loader_->seed();
  model.normalization = input_normalization();
  comm_.collective_try([&] { backend_->initialize(resolve_model_config(model, loader_->dataset())); });
  // Surface a shared GPU or an NCCL failure now, agreed, rather than in the first all-reduce.
  comm_.collective_try([&] { backend_->connect(comm_); });
  // With a backend that overlaps copies, the next batch's copy is staged while a step runs.
  stage_next_ = backend_->overlaps_copies();
}

std::optional<Normalization> TrainingRun::input_normalization() {
  const DatasetInfo& info = loader_->dataset();
  const bool wanted = config_.normalize == "auto";
  comm_.collective_try([&] {
    if (config_.normalize != "none" && info.variable_length)
      STRIDER_THROW(UsageError, config_.setting_name("normalize") + " " + config_.normalize +
                                    " needs fixed-size samples; " + config_.loader.data_path +
                                    " holds token sequences");
  });
  if (info.variable_length) return std::nullopt;
  if (!wanted && config_.normalize != "none") {
    // Statistics from a file: read on every rank (a file one rank cannot read fails on all).
    const InputStatistics stats = comm_.collective_try([&] {
      InputStatistics read = read_input_statistics(config_.normalize);
      if (read.sample_shape != info.sample_shape)
        STRIDER_THROW(DataError, "statistics file " + config_.normalize + " is for samples of shape " +
                                     format_shape(read.sample_shape) + ", but " + config_.loader.data_path + " has " +
                                     format_shape(info.sample_shape));
      return read;
    });
    if (comm_.is_root())
      log_info("normalizing the inputs: ", statistics_layout_name(stats.layout), ", ", stats.mean.size(),
               " means and standard deviations from ", config_.normalize);
    return stats.normalization();
  }
  const StatisticsLayout layout =
      comm_.collective_try([&] { return channel_layout(info.sample_shape, config_.channel_axis); });
  // A reader of its own (the Loader's belongs to its I/O thread); without normalization only the
  // first rows, for the warning.
  ReaderOptions reader_options = config_.loader.reader;
  reader_options.require_labels = false;
  std::unique_ptr<BatchReader> reader = open_reader(comm_, config_.loader.data_path, reader_options);
  constexpr std::int64_t warning_rows = 4096;
  const InputStatistics stats = compute_input_statistics(comm_, *reader, layout, wanted ? 0 : warning_rows);
  if (!wanted) {
    unnormalized_inputs_ = stats.mean_magnitude() > 100.0;  // the same on every rank (collective statistics)
    if (comm_.is_root() && unnormalized_inputs_)
      log_warn("the inputs of ", config_.loader.data_path, " are large (mean magnitude ", stats.mean_magnitude(),
               " over the first ", stats.rows, " rows) and not normalized; pass ", config_.setting_name("normalize"),
               " auto to train on (x - mean) / std");
    return std::nullopt;
  }
  if (comm_.is_root())
    log_info("normalizing the inputs: ", statistics_layout_name(layout), ", ", stats.mean.size(),
             " means and standard deviations over ", stats.rows, " rows (mean magnitude ", stats.mean_magnitude(), ")");
  return stats.normalization();
}

bool TrainingRun::checkpoint_to_resume() {
  if (!checkpoint_to_resume_)
    checkpoint_to_resume_ =
        config_.resume && !config_.checkpoint_path.empty() &&
        detail::checkpoint_on_every_rank(comm_, config_.checkpoint_path, config_.setting_name("resume"));
  return *checkpoint_to_resume_;
}

void TrainingRun::take_checkpoint_seed() {
  if (config_.loader.seed || !checkpoint_to_resume()) return;
  config_.loader.seed = comm_.collective_try([&] { return detail::read_checkpoint_seed(config_.checkpoint_path); });
}

bool TrainingRun::try_resume() {
  if (!checkpoint_to_resume()) return false;
  comm_.collective_try([&] {
    const detail::ResumePoint saved =
        detail::read_run_checkpoint(config_.checkpoint_path, fingerprint_, config_.loader.sampler.mode, *backend_);
    if (!saved.class_weights.empty()) {
      class_weights_ = saved.class_weights;
      if (detail::sampler_supports_reweighting(config_.loader.sampler.mode)) loader_->set_class_weights(class_weights_);
    }
    // Local: every rank reads the same state and takes the same decisions.
    resume_step_ = loader_->resume(saved.sampler_state);
    epoch_ = saved.sampler_state.epoch;
    global_step_ = saved.global_step;
  });
  summary_.seed = loader_->seed();
  if (comm_.is_root())
    log_info("resumed from ", config_.checkpoint_path, " at epoch ", epoch_, " step ", resume_step_, " (world size ",
             comm_.size(), ")");
  return true;
}

void TrainingRun::save_checkpoint(bool at_next_epoch) {
  if (config_.checkpoint_path.empty()) return;
  if (watchdog_) watchdog_->pause();
  detail::RunCheckpoint run;
  comm_.collective_try([&] {
    run.sampler_state = loader_->state_after(steps_done_);
    if (at_next_epoch) {  // the same configuration, nothing consumed yet of the next epoch
      ++run.sampler_state.epoch;
      run.sampler_state.consumed = 0;
    }
    run.class_weights = class_weights_;
    run.fingerprint = fingerprint_;
    run.global_step = global_step_;
    run.world_size = comm_.size();
    run.seed = summary_.seed;
    if (comm_.is_root()) detail::write_run_checkpoint(config_.checkpoint_path, run, *backend_);
  });
  if (comm_.is_root())
    log_info("checkpoint written: epoch ", run.sampler_state.epoch, " step ", at_next_epoch ? 0 : steps_done_, " -> ",
             config_.checkpoint_path);
}

bool TrainingRun::train_epoch(LoaderEpoch& epoch) {
  const Clock::time_point epoch_start = Clock::now();
  const PrefetchStats before = loader_->stats();
  detail::StepSettings settings;
  settings.learning_rate = config_.learning_rate;
  settings.momentum = config_.momentum;
  settings.stage_next = stage_next_;
  settings.learning_rate_name = config_.setting_name("learning_rate");
  if (unnormalized_inputs_) settings.normalize_hint = config_.setting_name("normalize") + " auto";
  detail::TrainingLoop loop(comm_, *backend_, loader_->dataset(), settings, trace_, *watchdog_, hooks_);
  const PrefetchStats at_start = progress_.enabled() ? loader_->stats() : PrefetchStats{};
  const detail::EpochTotals totals = loop.run(epoch, [&](std::int64_t steps_done, bool stopping, std::int64_t samples) {
    steps_done_ = steps_done;
    ++global_step_;
    progress_samples_ += samples;
    if (progress_.step_due()) {
      const std::int64_t steps = epoch.end_step();
      progress_.print(ProgressPoint{epoch_, config_.epochs, steps_done, steps,
                                    (config_.epochs - epoch_) * steps - steps_done, progress_samples_,
                                    stall_before_epoch_ + loader_->stats().stall_seconds - at_start.stall_seconds});
    }
    if (!stopping && config_.checkpoint_every > 0 && global_step_ % config_.checkpoint_every == 0) save_checkpoint();
  });
  const double seconds = seconds_since(epoch_start);
  const EpochSummary summary =
      detail::summarize_epoch(comm_, epoch_, epoch.first_step(), totals, seconds,
                              loader_->stats().stall_seconds - before.stall_seconds, class_weights_);
  summary_.epochs.push_back(summary);
  rank_wall_seconds_ += seconds;
  if (progress_.enabled()) stall_before_epoch_ += loader_->stats().stall_seconds - at_start.stall_seconds;
  if (comm_.is_root())
    print_on_root(detail::epoch_line(summary, config_.epochs, totals.stopped, loader_->dataset().variable_length));
  // A loss far above chance's (log K) on inputs trained as stored: the usual cause is their scale.
  if (comm_.is_root() && unnormalized_inputs_ && !warned_divergence_ &&
      summary.loss > 100 * std::log(static_cast<double>(num_classes_))) {
    warned_divergence_ = true;
    log_warn("the training loss is ", summary.loss, ", far above chance's ",
             std::log(static_cast<double>(num_classes_)), ": training diverges on inputs that are not normalized; try ",
             config_.setting_name("normalize"), " auto (or a lower ", config_.setting_name("learning_rate"), ")");
  }
  return !totals.stopped;
}

LoaderOptions TrainingRun::evaluation_options() const {
  LoaderOptions options;
  options.data_path = config_.eval_path.empty() ? config_.loader.data_path : config_.eval_path;
  options.reader = config_.loader.reader;
  options.sampler.batch_size = config_.eval_batch_size;
  options.prefetch = 2;
  options.allocator = backend_->host_allocator();
  return options;
}

void TrainingRun::evaluate() {
  const Clock::time_point start = Clock::now();
  const LoaderOptions options = evaluation_options();
  const ClassCounts counts =
      detail::evaluate_exactly(comm_, *backend_, options, num_classes_, !config_.eval_path.empty());
  summary_.per_class_recall = counts.recall();
  summary_.eval_accuracy = counts.accuracy();
  summary_.eval_samples = counts.total();
  if (comm_.is_root())
    print_on_root(detail::evaluation_line(options.data_path, counts.accuracy(), counts.total(), seconds_since(start),
                                          summary_.per_class_recall));
}

void TrainingRun::reweight_classes() {
  class_weights_ =
      detail::agree_on_new_class_weights(comm_, class_weights_, loader_->labels(), summary_.per_class_recall);
  comm_.collective_try([&] { loader_->set_class_weights(class_weights_); });
  if (comm_.is_root()) print_on_root(detail::class_weights_line(class_weights_));
}

void TrainingRun::collect_rank_summaries() {
  const PrefetchStats stats = loader_->stats();
  RankSummary mine;
  mine.rank = comm_.rank();
  mine.stall_seconds = stats.stall_seconds;
  mine.io_seconds = stats.io_seconds;
  mine.wall_seconds = rank_wall_seconds_;
  mine.bytes_read = stats.bytes_read;
  mine.samples = stats.samples;
  summary_.ranks = comm_.all_gather(mine);
}

void TrainingRun::finish() {
  collect_rank_summaries();
  watchdog_.reset();
  loader_->close();
}

TrainSummary TrainingRun::run() {
  comm_.collective_try([&] { check_settings(config_); });
  install_stop_signal_handlers();
  build_backend();
  take_checkpoint_seed();
  open_loader();
  comm_.collective_try([&] { loader_->require_steps(0); });
  build_model();
  // A separate evaluation file is checked now: after the last epoch is too late to learn it is wrong.
  if (!config_.eval_path.empty()) detail::check_evaluation_data(comm_, *backend_, evaluation_options(), num_classes_);
  const bool resumed = try_resume();
  comm_.collective_try([&] {
    if (!config_.trace_path.empty())
      trace_ = detail::SampleTrace(config_.trace_path, comm_.rank(), epoch_, resume_step_, resumed);
  });
  if (comm_.is_root()) progress_ = ProgressReporter(config_.progress_seconds);  // the clock starts here
  watchdog_ =
      std::make_unique<StepWatchdog>(config_.step_timeout_seconds, config_.setting_name("step_timeout_seconds"));
  // A checkpoint saved past this run's last epoch: rewriting it here would move it back to an
  // earlier position with its later weights (a further resume would train an epoch twice).
  const bool trained_already = epoch_ >= config_.epochs;
  if (trained_already && comm_.is_root())
    log_warn("the checkpoint is at epoch ", epoch_, " (counted from 0), at or past the end of ",
             config_.setting_name("epochs"), " ", config_.epochs,
             ": nothing to train; it is evaluated and left as it is");

  for (; epoch_ < config_.epochs; ++epoch_) {
    bool stopped = false;
    std::int64_t steps = 0;
    {
      LoaderEpoch epoch = loader_->epoch(epoch_);  // checks the file, plans (or takes the plan made ahead)
      steps = epoch.end_step();
      // A resumed epoch may have no step left (saved at its end).
      if (epoch.first_step() < epoch.end_step()) stopped = !train_epoch(epoch);
    }  // the epoch's reads end here
    if (stopped) {
      save_checkpoint();
      summary_.preempted = true;
      finish();
      if (comm_.is_root()) print_on_root(detail::stopped_line());
      return summary_;
    }
    steps_done_ = steps;
    const bool reweight_due =
        config_.reweight_every > 0 && (epoch_ + 1) % config_.reweight_every == 0 && epoch_ + 1 < config_.epochs;
    if (reweight_due) {
      evaluate();
      reweight_classes();
    }
    if (epoch_ + 1 < config_.epochs) {
      // The epoch is complete, re-weighting included: a checkpoint now resumes at the start of the
      // next one (resuming at this epoch's end would re-weight a second time).
      if (!config_.checkpoint_path.empty() && config_.checkpoint_every == 0) save_checkpoint(/*at_next_epoch=*/true);
    }
  }
  if (!trained_already) save_checkpoint();
  evaluate();
  if (comm_.is_root()) print_on_root(detail::final_recall_line(summary_.per_class_recall));
  finish();
  return summary_;
}

}  // namespace

TrainSummary train(const Communicator& comm, const TrainerConfig& config) {
  return TrainingRun(comm, config).run();
}

}  // namespace strider
