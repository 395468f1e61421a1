#pragma once
/// \file
/// The sampler interface every sampling mode implements.
///
/// A sampler is pure: a deterministic function of its configuration, the seed, the epoch, the world
/// size and the rank. It does no MPI, no I/O and reads no clock. The seed and anything that changes
/// during training (class weights) are agreed across ranks by the caller and passed in.
///
/// Guarantees of every mode: every rank runs the same number of steps per epoch (or collectives
/// hang); the plan depends only on (config, seed, epoch, world size, rank); a state saved after any
/// step resumes at the same cost whatever the step (no replay) and yields exactly the tail of the
/// uninterrupted epoch.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strider {

/// Where a sampler stands, serialisable into a checkpoint. `consumed` counts global units consumed
/// in the epoch: samples for every mode but `bucketed`, global batches for `bucketed`.
struct SamplerState {
  std::string mode;                    ///< the sampler's mode name ("distributed", ...)
  std::uint64_t config_hash = 0;       ///< hash of the configuration that must match on resume
  std::int64_t seed = 0;               ///< the agreed seed
  std::int64_t epoch = 0;              ///< the epoch in progress
  std::int64_t consumed = 0;           ///< global units consumed in that epoch
  std::int64_t global_batch_size = 0;  ///< R*B for fixed-size modes (0 where batches vary)

  /// One line of text, "mode=distributed config=... seed=... epoch=... consumed=... global_batch=...".
  std::string serialize() const;
  /// Parses serialize()'s text; throws DataError on anything else.
  static SamplerState parse(std::string_view text);
  bool operator==(const SamplerState& other) const;
};

/// The interface of every sampling mode. Not thread-safe for set_epoch; batch() is const and may be
/// called from several threads at once after set_epoch returned.
class Sampler {
 public:
  virtual ~Sampler() = default;
  Sampler& operator=(const Sampler&) = delete;

  /// The mode's name, as the CLI spells it ("distributed", "balanced", ...).
  virtual std::string mode() const = 0;
  /// A copy of this sampler as it is now, its epoch and its plan (null where a mode cannot copy
  /// itself): the Loader's plan-ahead sampler starts from one instead of planning epoch 0 again.
  virtual std::unique_ptr<Sampler> clone() const { return nullptr; }
  int world_size() const noexcept { return world_size_; }
  int rank() const noexcept { return rank_; }
  std::int64_t seed() const noexcept { return seed_; }
  std::int64_t epoch() const noexcept { return epoch_; }

  /// Prepares epoch `epoch`'s plan (may cost O(N): the distributed sampler materialises the
  /// epoch's order, like torch). Forgetting it repeats epoch 0's order every epoch.
  void set_epoch(std::int64_t epoch);

  /// Steps in the current epoch: the same on every rank.
  virtual std::int64_t num_steps() const = 0;
  /// The largest batch this rank can get in any step of the current epoch (for sizing buffers).
  virtual std::int64_t max_batch_size() const = 0;
  /// For variable-length rows: at least the elements (rows' lengths summed) of any batch this rank
  /// gets in the current epoch, where the plan knows it; -1 where it does not. The prefetcher sizes
  /// its buffers from it, else from every batch of the epoch read through the reader's lengths.
  virtual std::int64_t max_batch_elements() const { return -1; }
  /// Writes this rank's batch for `step` (0 <= step < num_steps()) as global sample indices, in
  /// the order the batch is to be delivered. O(batch size).
  virtual void batch(std::int64_t step, std::vector<std::int64_t>& indices) const = 0;

  /// Global units (samples, or batches for `bucketed`) consumed after `steps` full steps.
  virtual std::int64_t consumed_after(std::int64_t steps) const = 0;
  /// The step at which `consumed` global units have been consumed; throws UsageError when no step
  /// boundary of this world size falls there.
  virtual std::int64_t step_for_consumed(std::int64_t consumed) const = 0;
  /// R*B for fixed-size modes, 0 where batch sizes vary.
  virtual std::int64_t global_batch_size() const = 0;
  /// Hash of the configuration a checkpoint must match (excludes world size and per-rank batch
  /// size, so that elastic resume is possible; includes mode, dataset size, options, seed).
  virtual std::uint64_t config_hash() const = 0;

  /// The state after `steps_done` steps of the current epoch.
  SamplerState state(std::int64_t steps_done) const;
  /// Checks the state against this sampler (mode, configuration, global batch), sets its epoch and
  /// returns the step to continue from. Throws UsageError naming what differs.
  std::int64_t resume(const SamplerState& state);

 protected:
  Sampler(int world_size, int rank, std::int64_t seed);
  Sampler(const Sampler&) = default;  // clone()'s
  /// Called by set_epoch after epoch() changed.
  virtual void on_epoch() = 0;
  /// Throws UsageError unless 0 <= step < num_steps().
  void check_step(std::int64_t step) const;

 private:
  int world_size_;
  int rank_;
  std::int64_t seed_;
  std::int64_t epoch_ = 0;
};

/// The per-rank batch size that keeps a global batch at a new world size (elastic resume):
/// global_batch / world_size; throws UsageError when it does not divide.
std::int64_t per_rank_batch_for(std::int64_t global_batch, int world_size);

/// Hash of this rank's whole epoch plan (every batch, in order, with batch boundaries).
std::uint64_t plan_hash(const Sampler& sampler);

}  // namespace strider
