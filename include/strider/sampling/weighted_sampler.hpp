#pragma once
/// \file
/// Weighted sampling with replacement (torch's WeightedRandomSampler, distributed): per-class or
/// per-sample weights, a fixed number of draws per epoch, weights that may change between epochs.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/sampling/class_index.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

/// Configuration of the weighted sampler. Give class weights (with a class index) or sample weights.
struct WeightedSamplerConfig {
  /// The labels' class index: required with class weights (and for the default weights).
  std::shared_ptr<const ClassIndex> classes;
  /// Per-class weights, K entries: every sample of class c has weight class_weights[c] (torch's
  /// weights[i] = w[label[i]]), so class c is drawn with probability w_c*count_c / sum_k w_k*count_k.
  /// Empty: 1/count_c (every non-empty class equally likely).
  std::vector<double> class_weights;
  /// Per-sample weights, N entries, instead of class weights (then `classes` is optional).
  std::shared_ptr<const std::vector<double>> sample_weights;
  std::int64_t num_samples = 0;  ///< draws per epoch over all ranks (torch's num_samples); 0: N
  std::int64_t batch_size = 0;   ///< B per rank; 0: the whole epoch is one batch
  bool drop_last = false;        ///< as the distributed sampler: floor(num_samples/R) per rank
  bool drop_last_batch = false;  ///< drop a last partial batch
  std::int64_t seed = 0;
};

/// Throws UsageError naming `what` unless every weight is finite and >= 0 and one is > 0.
void check_weights(const std::vector<double>& weights, const std::string& what);

/// Draws with replacement: global position p of the epoch (0 <= p < num_samples) is a pure function
/// of (seed, epoch, p, weights): a counter-based stream keyed by them picks an integer below the
/// total of the weights (quantised to integers summing to about 2^62, every positive weight at
/// least 1) exactly, and the cumulative weights find the class (up to 64 classes: a table of the
/// integer's top bits, then a short scan; else a binary search), then a uniform member of it, or
/// the sample. Positions are split over ranks as the distributed sampler
/// without shuffle splits 0..num_samples-1 (rank r takes r, r+R, ...; padded by wrapping), so a
/// global batch is the same set of positions, hence samples, for any R with the same R*B, and any
/// step is drawn in O(B log K) (O(B log N) for sample weights) with nothing replayed: resume is O(1).
class WeightedSampler final : public Sampler {
 public:
  /// Throws UsageError for missing labels, weights of the wrong length or invalid weights
  /// (negative, NaN, infinite, all zero), num_samples < 0, B < 0, or a bad world size or rank.
  WeightedSampler(const WeightedSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "weighted"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new WeightedSampler(*this)); }
  std::int64_t num_steps() const override { return positions_.num_steps(); }
  std::int64_t max_batch_size() const override { return positions_.max_batch_size(); }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  std::int64_t consumed_after(std::int64_t steps) const override { return positions_.consumed_after(steps); }
  std::int64_t step_for_consumed(std::int64_t consumed) const override {
    return positions_.step_for_consumed(consumed);
  }
  std::int64_t global_batch_size() const override { return positions_.global_batch_size(); }
  /// Covers the weights bit for bit: a checkpoint resumes only with the weights it was saved with.
  std::uint64_t config_hash() const override;

  /// Replaces the class weights (same rules as the config; on an error the old ones stay). Takes
  /// effect at once: call it between epochs. Every rank must pass bit-identical weights (see
  /// update_class_weights). Not thread-safe.
  void set_class_weights(std::vector<double> class_weights);
  /// The class weights in use (empty with sample weights).
  const std::vector<double>& class_weights() const noexcept { return config_.class_weights; }
  /// The probability of drawing class `label` (class weights) under the quantised weights.
  double class_probability(int label) const;
  /// The sample drawn at global position `position` of the current epoch. O(log K) or O(log N).
  std::int64_t sample_at(std::int64_t position) const;
  const WeightedSamplerConfig& config() const noexcept { return config_; }

 private:
  void on_epoch() override {}
  void build_cumulative();
  /// Replaces each of `count` global positions by the sample drawn there, with the epoch's draw key.
  void draw_samples(std::uint64_t key, std::int64_t* positions, std::size_t count) const;

  WeightedSamplerConfig config_;
  DistributedSampler positions_;           // splits positions 0..num_samples-1 over ranks
  std::vector<std::uint64_t> cumulative_;  // integer weights' running sums (classes or samples)
  // Per class (class weights): its members in the class index, their count and the mask a draw
  // below the count takes (detail::CounterStream::below); 4-5% of a draw's time against looking
  // them up in the class index per draw.
  struct ClassDraw {
    const std::int64_t* members = nullptr;
    std::uint64_t count = 0, mask = 0;
  };
  std::vector<ClassDraw> class_draws_;
  // Up to kTableClasses classes (or sample weights): the count of cumulative weights at or below
  // each bucket's first ticket, the buckets being the tickets' top kTicketTableBits bits (those
  // below ticket_shift_ dropped); more are found by binary search.
  static constexpr std::size_t kTableClasses = 64;
  static constexpr int kTicketTableBits = 8;
  std::vector<std::uint32_t> ticket_classes_;
  int ticket_shift_ = 0;
  std::uint64_t weights_hash_ = 0;
};

}  // namespace strider
