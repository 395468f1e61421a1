#pragma once
/// \file
/// The common base of the class-aware modes that fill every step with one full global batch read
/// from per-class shuffled sample lists (balanced, stratified).

#include <cstdint>
#include <memory>
#include <vector>

#include "strider/sampling/class_index.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

namespace detail {
class ClassCycler;
}  // namespace detail

/// Every step is one global batch of G = R*B samples, B on every rank; the epoch has
/// ceil(total/G) steps (floor with drop_last); a state counts global samples consumed (k*G after k
/// steps). set_epoch shuffles each class's samples with (seed, epoch) (O(N)); the derived mode
/// decides which class occurrences form each global batch and which rank gets which.
class ClassListSampler : public Sampler {
 public:
  std::int64_t num_steps() const override { return num_steps_; }
  std::int64_t max_batch_size() const override { return num_steps_ > 0 ? batch_size_ : 0; }
  std::int64_t consumed_after(std::int64_t steps) const override;
  std::int64_t step_for_consumed(std::int64_t consumed) const override;
  std::int64_t global_batch_size() const override { return batch_size_ * world_size(); }
  /// The classes the mode draws from, in label order.
  const std::vector<int>& classes_in_use() const noexcept { return classes_in_use_; }

 protected:
  /// Throws UsageError for no class index or batch_size < 0 (and, via Sampler, a bad world size or
  /// rank). `stream` separates the modes' shuffles.
  ClassListSampler(std::shared_ptr<const ClassIndex> classes, std::int64_t batch_size, bool shuffle,
                   std::uint64_t stream, int world_size, int rank, std::int64_t seed, const char* mode_name);
  /// Sets the classes in use and the epoch's size: `total` samples over all ranks. With batch_size
  /// 0 one step holds the epoch (B = ceil(total/R)). Call once from the derived constructor.
  void set_layout(std::vector<int> classes_in_use, std::int64_t total, bool drop_last);
  void on_epoch() override;
  /// Appends this rank's share of class `label`'s occurrences [first, first + count), dealt from
  /// rank `run_start` mod R onwards one rank per occurrence.
  void deal(int label, std::int64_t first, std::int64_t count, std::uint64_t run_start,
            std::vector<std::int64_t>& indices) const;
  /// Shuffles this rank's batch of `step` (dealt class by class) when shuffling is on.
  void finish_batch(std::int64_t step, std::vector<std::int64_t>& indices) const;
  const ClassIndex& classes() const noexcept { return *classes_; }
  std::int64_t batch_size() const noexcept { return batch_size_; }

 private:
  std::shared_ptr<const ClassIndex> classes_;
  std::int64_t requested_batch_size_ = 0;
  bool shuffle_ = true;
  std::uint64_t stream_ = 0;
  std::vector<int> classes_in_use_;
  std::int64_t batch_size_ = 0;
  std::int64_t num_steps_ = 0;
  std::shared_ptr<const detail::ClassCycler> cycler_;  // the current epoch's class lists
};

}  // namespace strider
