#pragma once
// Internals shared by the class-aware samplers (balanced, weighted, stratified): per-class shuffled
// sample lists read cyclically, the dealing of a class's run of occurrences to ranks, counter-based
// draws, and the step arithmetic of modes with a fixed global batch.

#include <cstdint>
#include <vector>

#include "strider/core/hash.hpp"
#include "strider/sampling/class_index.hpp"

namespace strider::detail {

__extension__ using uint128 = unsigned __int128;

/// floor(a * b / c) without overflow (c > 0).
inline std::uint64_t mul_div(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return static_cast<std::uint64_t>(static_cast<uint128>(a) * b / c);
}

/// A counter-based stream of 64-bit words: word i of the stream keyed by (key, counter) is a pure
/// function of the three, so that any position of an epoch can be drawn without the ones before.
/// Inline: the weighted sampler draws two or three words per sample (many positions at a time
/// through counter_lanes.hpp, whose every build gives these streams' words).
class CounterStream {
 public:
  CounterStream() noexcept = default;  // a placeholder, to be assigned a stream
  CounterStream(std::uint64_t key, std::uint64_t counter) noexcept : state_(state_of(key, counter)) {}
  /// The stream of state `state` (state_of) with `drawn` words drawn: where a draw left off.
  static CounterStream resumed(std::uint64_t state, std::uint64_t drawn) noexcept {
    CounterStream stream;
    stream.state_ = state;
    stream.drawn_ = drawn;
    return stream;
  }
  /// The state of the stream keyed by (key, counter).
  static constexpr std::uint64_t state_of(std::uint64_t key, std::uint64_t counter) noexcept {
    return mix64(key ^ mix64(counter));
  }
  /// Word i (from 1) of the stream of state `state`.
  static constexpr std::uint64_t word_of(std::uint64_t state, std::uint64_t i) noexcept {
    return mix64(state + kGoldenGamma * i);
  }
  std::uint64_t next() noexcept { return word_of(state_, ++drawn_); }
  /// Words drawn so far.
  std::uint64_t drawn() const noexcept { return drawn_; }
  /// An unbiased integer in [0, bound) (masked rejection: fewer than two words on average).
  std::uint64_t below(std::uint64_t bound) noexcept { return below(bound, mask_of(bound)); }
  /// below(bound) with mask_of(bound) computed once for many draws.
  std::uint64_t below(std::uint64_t bound, std::uint64_t mask) noexcept {
    if (bound <= 1) return 0;
    std::uint64_t value = next() & mask;
    while (value >= bound) value = next() & mask;
    return value;
  }
  /// The smallest all-ones mask covering bound - 1 (0 for a bound of 0 or 1).
  static std::uint64_t mask_of(std::uint64_t bound) noexcept {
    return bound <= 1 ? 0 : ~std::uint64_t{0} >> __builtin_clzll(bound - 1);
  }

 private:
  static constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;
  std::uint64_t state_ = 0;
  std::uint64_t drawn_ = 0;
};

/// One epoch's shuffled sample list per class, read cyclically: occurrence j of class c is the
/// sample at j mod count(c) of the class's list, rotated by a fresh random offset for every pass
/// after the first, so that an oversampled class is not dealt to the ranks in the same pattern on
/// every pass. Each sample appears floor or ceil of (occurrences / count) times. O(N) to build.
class ClassCycler {
 public:
  /// Shuffles each class's samples (stream derive_seed(seed, epoch, stream + c)); in index order
  /// without shuffle.
  void build(const ClassIndex& index, bool shuffle, std::int64_t seed, std::int64_t epoch, std::uint64_t stream);
  /// The sample of class `label`'s occurrence `occurrence` (>= 0) in the epoch. The class must have samples.
  std::int64_t sample(int label, std::int64_t occurrence) const;

 private:
  std::vector<std::vector<std::int64_t>> lists_;
  std::uint64_t pass_key_ = 0;
  bool shuffle_ = true;
};

/// Appends rank `rank`'s share of class `label`'s occurrences [first, first + count): occurrence
/// first + t goes to rank (arc_start + t) mod world_size, so that consecutive occurrences go to
/// consecutive ranks and each rank gets floor or ceil of count / world_size.
void deal_run(const ClassCycler& cycler, int label, std::int64_t first, std::int64_t count, std::uint64_t arc_start,
              int world_size, int rank, std::vector<std::int64_t>& out);

/// Shuffles one rank's batch with a stream of its own (seed, epoch, step, rank): batches are dealt
/// class by class and would otherwise come grouped by class.
void shuffle_batch(std::vector<std::int64_t>& batch, std::int64_t seed, std::int64_t epoch, std::int64_t step,
                   int rank);

/// Steps of modes whose every step is one full global batch: ceil(total / global_batch), or floor
/// with drop_last.
std::int64_t fixed_batch_steps(std::int64_t total, std::int64_t global_batch, bool drop_last);
/// consumed_after for such modes: min(steps, num_steps) * global_batch.
std::int64_t fixed_batch_consumed(std::int64_t steps, std::int64_t num_steps, std::int64_t global_batch);
/// step_for_consumed for such modes; throws UsageError off a step boundary.
std::int64_t fixed_batch_step_for(std::int64_t consumed, std::int64_t num_steps, std::int64_t global_batch);

/// Non-empty classes in increasing label order.
std::vector<int> classes_with_samples(const ClassIndex& index);

}  // namespace strider::detail
