#pragma once
/// \file
/// Class-balanced sampling: every class drawn the same number of times per epoch (oversampling the
/// small classes or undersampling the large ones), split so that every rank gets a fair share of
/// every class.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/sampling/class_list_sampler.hpp"

namespace strider {

/// How many samples each class contributes per epoch.
enum class BalanceTarget {
  max,    ///< the largest class's count: the others are oversampled
  min,    ///< the smallest non-empty class's count: the others are undersampled
  count,  ///< a given count per class
};

/// Configuration of the balanced sampler.
struct BalancedSamplerConfig {
  std::shared_ptr<const ClassIndex> classes;  ///< the labels' class index (required)
  BalanceTarget target = BalanceTarget::max;
  std::int64_t per_class = 0;   ///< T for BalanceTarget::count (> 0)
  std::int64_t batch_size = 0;  ///< B per rank; 0: the whole epoch is one batch
  bool shuffle = true;          ///< shuffle each class's samples with seed+epoch
  bool drop_last = false;       ///< drop a last partial global batch instead of filling it
  std::int64_t seed = 0;
};

/// Parses "max", "min" or a positive count into (target, per_class); throws UsageError.
void parse_balance(const std::string& text, BalancedSamplerConfig& config);

/// Every non-empty class c contributes T occurrences per epoch (T from the target), drawn from its
/// shuffled samples, cycled when T exceeds its count (each sample appears floor or ceil of
/// T/count times). Empty classes are skipped.
///
/// Layout (K classes with samples, global batch G = R*B): global batch k holds
/// v[(c+k) mod K] occurrences of class c, where v is the even split of G into K parts (so every
/// global batch holds every class within one of G/K, and any K consecutive batches G of each).
/// Class c's occurrence j goes to rank (floor(c*G/K) + j) mod R. Within a global batch these runs
/// tile G consecutive ranks, so every rank gets exactly B; and each class's occurrences go round the
/// ranks in turn, so every rank's count of every class differs by at most one from any other rank's,
/// after any number of steps. The global batch's set does not depend on R (elastic resume). The
/// epoch has ceil(K*T/G) steps (floor with drop_last), so each class gets at least T occurrences
/// (at most T + G/K + 1). Each rank's batch is shuffled. batch() is O(B + K); set_epoch O(N).
class BalancedSampler final : public ClassListSampler {
 public:
  /// Throws UsageError for no class index, B < 0, a per-class count <= 0, world_size <= 0 or rank
  /// outside [0, world_size).
  BalancedSampler(const BalancedSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "balanced"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new BalancedSampler(*this)); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::uint64_t config_hash() const override;

  /// T, the occurrences per class per epoch before the last batch is filled.
  std::int64_t per_class_target() const noexcept { return per_class_; }
  const BalancedSamplerConfig& config() const noexcept { return config_; }

 private:
  BalancedSamplerConfig config_;
  std::int64_t per_class_ = 0;
};

}  // namespace strider
