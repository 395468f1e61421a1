#pragma once
// What a training run's checkpoint holds, on top of the model and the optimizer (save_model): the
// sampler's position, the class weights in force, the dataset fingerprint, the global step, the
// world size and the seed. Written by rank 0; read back by every rank on --resume.

#include <cstdint>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/device/backend.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider::detail {

/// A training run's position and identity in a checkpoint.
struct RunCheckpoint {
  SamplerState sampler_state;         ///< after the last finished step
  std::vector<double> class_weights;  ///< in force; empty: none given (not stored)
  std::uint64_t fingerprint = 0;      ///< of the training data (dataset_fingerprint)
  std::int64_t global_step = 0;       ///< steps finished over the run, all epochs
  int world_size = 0;
  std::int64_t seed = 0;
};

/// Writes `run` and the backend's model and optimizer to `path`, atomically (write_checkpoint).
/// Not collective: one rank writes.
void write_run_checkpoint(const std::string& path, const RunCheckpoint& run, const Backend& backend);

/// Where a run resumes: what read_run_checkpoint takes from a checkpoint.
struct ResumePoint {
  SamplerState sampler_state;         ///< after the last finished step (holds the seed)
  std::vector<double> class_weights;  ///< in force when saved; empty: none stored
  std::int64_t global_step = 0;       ///< steps finished over the run, all epochs
};

/// Reads the checkpoint at `path`, checks that it was written for data with this fingerprint and
/// for sampler mode `mode` (UsageError naming what differs), and loads its model and optimizer
/// into `backend` (initialized with the same model). Not collective; the same result on every rank
/// that reads the same file.
ResumePoint read_run_checkpoint(const std::string& path, std::uint64_t fingerprint, const std::string& mode,
                                Backend& backend);

/// The seed of the run that wrote the checkpoint at `path` (its sampler state's), for a resume
/// without --seed. Not collective.
std::int64_t read_checkpoint_seed(const std::string& path);

/// Collective over comm: whether a checkpoint exists at `path` on every rank. False on every rank
/// when it exists on none (rank 0 logs "<resume_name>: no checkpoint at PATH; starting fresh");
/// throws UsageError on every rank when some ranks see it and others do not.
bool checkpoint_on_every_rank(const Communicator& comm, const std::string& path, const std::string& resume_name);

}  // namespace strider::detail
