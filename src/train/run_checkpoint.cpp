#include "train/run_checkpoint.hpp"

#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/train/checkpoint.hpp"
#include "strider/train/fingerprint.hpp"

namespace strider::detail {

void write_run_checkpoint(const std::string& path, const RunCheckpoint& run, const Backend& backend) {
  Checkpoint checkpoint;
  checkpoint.fields["sampler.state"] = run.sampler_state.serialize();
  checkpoint.fields["sampler.mode"] = run.sampler_state.mode;
  if (!run.class_weights.empty()) checkpoint.fields["sampler.class_weights"] = format_real_list(run.class_weights);
  checkpoint.fields["dataset.fingerprint"] = fingerprint_hex(run.fingerprint);
  checkpoint.fields["run.global_step"] = std::to_string(run.global_step);
  checkpoint.fields["run.world_size"] = std::to_string(run.world_size);
  checkpoint.fields["run.seed"] = std::to_string(run.seed);
  save_model(backend, checkpoint);
  write_checkpoint(path, checkpoint);
}

ResumePoint read_run_checkpoint(const std::string& path, std::uint64_t fingerprint, const std::string& mode,
                                Backend& backend) {
  const Checkpoint checkpoint = read_checkpoint(path);
  if (checkpoint.field("dataset.fingerprint") != fingerprint_hex(fingerprint))
    STRIDER_THROW(UsageError, "checkpoint " + path + " was written for another dataset (fingerprint " +
                                  checkpoint.field("dataset.fingerprint") + ", this data has " +
                                  fingerprint_hex(fingerprint) + ")");
  ResumePoint run;
  run.sampler_state = SamplerState::parse(checkpoint.field("sampler.state"));
  if (run.sampler_state.mode != mode)
    STRIDER_THROW(UsageError, "checkpoint " + path + " was written with --sampler " + run.sampler_state.mode +
                                  ", this run uses --sampler " + mode);
  if (checkpoint.fields.count("sampler.class_weights"))
    run.class_weights = parse_real_list(checkpoint.field("sampler.class_weights"), "class-weights");
  load_model(checkpoint, backend);
  run.global_step = std::stoll(checkpoint.field("run.global_step"));
  return run;
}

std::int64_t read_checkpoint_seed(const std::string& path) {
  return SamplerState::parse(read_checkpoint(path).field("sampler.state")).seed;
}

bool checkpoint_on_every_rank(const Communicator& comm, const std::string& path, const std::string& resume_name) {
  const bool exists = checkpoint_exists(path);
  if (comm.all_reduce(exists ? 1 : 0, ReduceOp::min) == 1) return true;
  if (comm.all_reduce(exists ? 1 : 0, ReduceOp::max) == 1)
    STRIDER_THROW(UsageError, "checkpoint " + path + " is visible on some ranks only; put it on a shared file system");
  if (comm.is_root()) log_info(resume_name, ": no checkpoint at ", path, "; starting fresh");
  return false;
}

}  // namespace strider::detail
