#pragma once
/// \file
/// Length-bucketed batches under a token budget, balanced across ranks.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "strider/core/shared_view.hpp"
#include "strider/sampling/sampler.hpp"
#include "strider/sampling/shared_order.hpp"

namespace strider {

namespace sampling_detail {
struct WindowMarks;
struct OrderWords;
}  // namespace sampling_detail

/// Configuration of the bucketed sampler.
struct BucketedSamplerConfig {
  /// Per-sample lengths in tokens (each >= 1); N is their count. Shared, never copied.
  SharedView<std::int64_t> lengths;
  std::int64_t max_tokens = 0;           ///< a batch's cost, count * its longest length, stays <= this
  std::int64_t max_batch_size = 0;       ///< at most this many samples per batch (0: no limit)
  std::int64_t batch_size_multiple = 1;  ///< batch sample counts are multiples of this (but the epoch's last)
  std::int64_t megabatch = 64;           ///< sort window: this many batches' worth of tokens (0: the epoch)
  std::int64_t step_group = 64;          ///< batches sorted by cost in groups of this many (1: no sorting)
  bool most_expensive_first = false;     ///< the costliest batch runs first (rank 0, step 0)
  bool shuffle = true;                   ///< false: dataset order, batches in order of formation
  std::int64_t seed = 0;
  /// Each epoch's plan made once for several ranks (the Loader's, once per node); null: every rank
  /// makes it. The batches are the same either way.
  std::shared_ptr<SharedPlan> shared_plan;
};

/// Batches of similar-length samples, whose cost (count * longest length) stays under a token
/// budget. Per epoch (set_epoch, O(N log W) time, O(N) memory, the same on every rank):
///  1. shuffle the samples (seed, epoch);
///  2. cut the order into windows of about `megabatch` batches' worth of tokens, sort each window by
///     length and pack it greedily into batches; a window's last, partial batch joins the next window;
///  3. shuffle the order of the batches (optionally move the costliest one first);
///  4. sort the batches by cost within consecutive groups of `step_group`, alternately descending
///     and ascending, so that neighbouring batches cost about the same, also across group borders.
/// The resulting sequence of batches does not depend on the world size R: step k runs batches
/// kR .. kR+R-1, one per rank, so the ranks of a step get batches of similar cost. The count is
/// padded to a multiple of R by repeating the first batches: every rank runs the same number of
/// steps, but sample counts per step differ. A saved state counts global batches; resuming at
/// another R is exact when R divides the batches consumed.
class BucketedSampler final : public Sampler {
 public:
  /// Throws UsageError for missing lengths, max_tokens <= 0, a sample longer than max_tokens (naming
  /// it) or shorter than 1, batch_size_multiple < 1 or too large for the longest sample, max_batch_size
  /// below the multiple, megabatch < 0, step_group < 1, or a bad world size or rank. O(N).
  BucketedSampler(const BucketedSamplerConfig& config, int world_size, int rank);

  std::string mode() const override { return "bucketed"; }
  std::unique_ptr<Sampler> clone() const override { return std::unique_ptr<Sampler>(new BucketedSampler(*this)); }
  std::int64_t num_steps() const override;
  std::int64_t max_batch_size() const override { return largest_batch_; }
  /// The most tokens of any of the epoch's batches (every rank's): at most max_tokens.
  std::int64_t max_batch_elements() const override { return largest_batch_tokens_; }
  void batch(std::int64_t step, std::vector<std::int64_t>& indices) const override;
  /// Global batches: steps * R (padding repeats included).
  std::int64_t consumed_after(std::int64_t steps) const override;
  std::int64_t step_for_consumed(std::int64_t consumed) const override;
  std::int64_t global_batch_size() const override { return 0; }
  std::uint64_t config_hash() const override;

  /// The epoch's batches before padding (the same for every world size).
  std::int64_t num_batches() const noexcept { return static_cast<std::int64_t>(sequence_.size()); }
  /// Batch `position` (0 <= position < num_batches()) of the epoch's sequence, as sample indices.
  /// A plan copied from a shared one (shared_plan, made by another rank) holds this rank's batches
  /// only: another rank's throws UsageError.
  void sequence_batch(std::int64_t position, std::vector<std::int64_t>& indices) const;
  /// Its cost: count * longest length, in tokens.
  std::int64_t sequence_cost(std::int64_t position) const;

  /// Diagnostics: plans of this sampler and its copies whose first part (the shuffle, the windows,
  /// their samples marked for dealing out) was made ahead, by a rank that waited for the plan before.
  std::int64_t plans_begun_ahead() const;

  /// Takes later epochs' plans from `shared` (BucketedSamplerConfig::shared_plan), and the bytes
  /// a plan of this sampler's N samples in up to `batches` batches needs there.
  void share_plans(std::shared_ptr<SharedPlan> shared) noexcept { config_.shared_plan = std::move(shared); }
  std::int64_t shared_plan_bytes(std::int64_t batches) const noexcept;

 private:
  struct Span {
    std::int64_t first = 0;  // into samples_ (or wide_samples_)
    std::int64_t count = 0;
    std::int64_t longest = 0;  // tokens
    std::int64_t cost() const noexcept { return count * longest; }
  };

  void on_epoch() override;
  /// Tokens of a window's new samples (see make_plan), an upper bound on the epoch's windows, and
  /// whether the windows' samples are marked for dealing out all at once (sampling_detail::mark_windows).
  std::int64_t window_tokens() const noexcept;
  std::uint64_t most_windows() const noexcept;
  bool markable() const noexcept;
  /// The name of epoch `epoch`'s plan under this configuration (never 0).
  std::uint64_t plan_key(std::int64_t epoch) const;
  /// The first part of a plan: the epoch's shuffled order, cut into windows (marks.ends); true
  /// where each window's samples are also marked for dealing out all at once
  /// (sampling_detail::mark_windows: the marks then hold the order's indices, and the rest of the
  /// plan needs nothing else of it), else the order is in order.wide.
  bool order_windows(std::int64_t epoch, sampling_detail::OrderWords& order, sampling_detail::WindowMarks& marks) const;
  /// The next epoch's first part, marked, for whichever copy of this sampler makes that plan: what
  /// a rank does while it waits for the node's plan of this epoch when the next is its to make.
  /// True where the second part's first step (sampling_detail::mark_positions) is left to begin.
  bool prepare_next_plan();
  /// A slice of that step, while the wait lasts: false once none is left (or the marks were taken).
  bool continue_next_plan();
  void make_plan();
  /// The plan as SharedPlan publishes it, and back: false for bytes that are not a plan of this
  /// sampler's N samples.
  std::vector<SharedPlan::Piece> plan_pieces();
  bool load_plan(const std::byte* data, std::int64_t bytes);
  /// A shared plan's bytes with indices of `index_bytes` each.
  static std::int64_t plan_bytes(std::int64_t samples, std::int64_t batches, std::size_t index_bytes) noexcept;
  /// Bytes of each of the plan's sample indices: 4, or 8 where they are wide.
  std::size_t index_bytes() const noexcept { return wide_ ? sizeof(std::int64_t) : sizeof(std::uint32_t); }
  /// Sorts a window's entries ascending by (length, index), and packs a sorted window into batches,
  /// leaving its last, partial batch (unless `last_window`) for the next.
  void sort_window(std::vector<std::uint64_t>& window);
  void pack_window(std::vector<std::uint64_t>& window, bool last_window);
  /// pack_window from a window's counts alone, counts[l] samples of length shortest + l (l < span),
  /// the first at place `first` of samples_ (sampling_detail::PackWindow): adds its batches and
  /// returns how many of its last samples carry on into the next window.
  std::size_t pack_counts(const std::size_t* counts, std::size_t span, std::int64_t shortest, bool last_window,
                          std::size_t first);
  /// Appends a batch packed by either, of `tokens` tokens in all, to the epoch's sequence.
  void add_batch(const Span& batch, std::int64_t tokens);
  /// f(samples_) or f(wide_samples_), whichever holds the plan's indices.
  template <typename F>
  void with_samples(F&& f);
  template <typename F>
  void with_samples(F&& f) const;

  BucketedSamplerConfig config_;
  std::uint64_t lengths_hash_ = 0;
  std::int64_t shortest_length_ = 1, longest_length_ = 1;  // of the N samples
  // Their sum, modulo 2^64: exact where entries are packed (then N * max_tokens < 2^64).
  std::uint64_t total_tokens_ = 0;
  // Sample indices, batch after batch, in order of formation: 4 bytes each where every index fits
  // (N <= 2^32; half the memory and half the copies of a node-shared plan), else 8 (wide_).
  std::vector<std::uint32_t> samples_;
  std::vector<std::int64_t> wide_samples_;
  bool wide_ = false;
  std::vector<Span> sequence_;  // the epoch's batches in run order
  // The window and its sort's scratch, reused across windows and epochs.
  std::vector<std::uint64_t> keys_, spare_keys_, window_bitmap_;
  std::vector<std::size_t> length_starts_;
  // The first part of a plan made ahead (prepare_next_plan), with as much of its marking pass as a
  // wait left time for (continue_next_plan), shared by this sampler's copies: the Loader plans each
  // epoch on the copy the epoch before did not.
  struct Ahead;
  std::shared_ptr<Ahead> ahead_;
  int index_bits_ = 0;         // bits of a window entry's index where its length is packed above it (0: not packed)
  bool narrow_order_ = false;  // the marked order shuffled as 32-bit words (sampling_detail::OrderWords)
  // Each sample's length less the shortest, in 2 bytes (shared by this sampler's copies), where the
  // order is narrow and N at most kMostBucketSamples: what each plan reads of the lengths twice, in a
  // quarter of their 8 bytes (none: the plans read the lengths).
  std::shared_ptr<const std::vector<std::uint16_t>> buckets_;
  std::int64_t largest_batch_ = 0;
  std::int64_t largest_batch_tokens_ = 0;
  std::int64_t plan_header_[3] = {};  // plan_pieces(): the batch count, the largest batch and its most tokens
};

}  // namespace strider
