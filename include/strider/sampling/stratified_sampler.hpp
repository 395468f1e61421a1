#pragma once
/// \file
/// Stratified batches: every global batch, and every rank's batch, holds every class in proportion
/// to a target (the class frequencies, uniform, or given weights), within one sample.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/sampling/class_list_sampler.hpp"

namespace strider {

/// The class proportions a stratified batch follows.
enum class StratifyTarget {
  freq,     ///< the dataset's class frequencies count_c / N
  uniform,  ///< every class with samples equally
  weights,  ///< given weights, normalised
};

/// Configuration of the stratified sampler.
struct StratifiedSamplerConfig {
  std::shared_ptr<const ClassIndex> classes;  ///< the labels' class index (required)
  StratifyTarget target = StratifyTarget::freq;
  std::vector<double> target_weights;  ///< K weights for StratifyTarget::weights
  std::int64_t num_samples = 0;        ///< samples per epoch over all ranks; 0: N
  std::int64_t batch_size = 0;         ///< B per rank, >= the classes in the target; 0: one batch
  bool shuffle = true;                 ///< shuffle each class's samples with seed+epoch
  bool drop_last = false;              ///< drop a last partial global batch instead of filling it
  std::int64_t seed = 0;
};

/// Parses "freq", "uniform" or "w0,w1,..." into the config's target; throws UsageError.
void parse_stratify_target(const std::string& text, StratifiedSamplerConfig& config);

/// Global batch k (G = R*B samples) holds n[k][c] occurrences of class c with n[k][c] = floor or
/// ceil of G*p_c, and sum_c n[k][c] = G; which classes round up in a batch is chosen by the largest
/// running deficit against k*G*p_c, so the epoch follows the target closely too. The composition
/// depends only on G and the target (precomputed, O(steps*K) integers, exact integer arithmetic).
/// Class c's occurrences are read from its shuffled samples, cycling when they run out. The batch
/// is laid out class by class (rarest first) and dealt to ranks round-robin from where the previous
/// batch's rarer classes ended, so each rank gets exactly B, of them floor or ceil of B*p_c of
/// class c, hence within one sample of the target too. The global batch's set does not depend on R (elastic resume).
/// Each rank's batch is shuffled. batch() is O(B + K); set_epoch O(N).
class StratifiedSampler final : public ClassListSampler {
 public:
  /// Throws UsageError for no class index, bad target weights (negative, NaN, infinite, all zero, a
  /// positive weight on an empty class, wrong count), num_samples < 0, B < 0, a per-rank batch
  /// smaller than the number of classes in the target, or a bad world size or rank.
  StratifiedSampler(const StratifiedSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "stratified"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new StratifiedSampler(*this)); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::uint64_t config_hash() const override;

  /// The target proportion of class `label` (0 for classes outside the target).
  double target_proportion(int label) const;
  /// Occurrences of class `label` in global batch `step`.
  std::int64_t global_count(std::int64_t step, int label) const;
  const StratifiedSamplerConfig& config() const noexcept { return config_; }

 private:
  /// Fills before_ with the composition of every global batch.
  void plan_compositions();

  StratifiedSamplerConfig config_;
  std::vector<std::uint64_t> weights_;  // integer target weights of classes_in_use()
  std::uint64_t weight_total_ = 0;
  std::vector<std::int64_t> before_;     // (num_steps+1) x K: class occurrences before each step
  std::vector<std::size_t> deal_order_;  // classes by increasing weight: the order runs are dealt in
};

}  // namespace strider
