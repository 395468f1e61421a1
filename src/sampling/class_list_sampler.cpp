#include "strider/sampling/class_list_sampler.hpp"

#include <algorithm>

#include "sampling/class_plan.hpp"
#include "strider/core/error.hpp"

namespace strider {

ClassListSampler::ClassListSampler(std::shared_ptr<const ClassIndex> classes, std::int64_t batch_size, bool shuffle,
                                   std::uint64_t stream, int world_size, int rank, std::int64_t seed,
                                   const char* mode_name)
    : Sampler(world_size, rank, seed),
      classes_(std::move(classes)),
      requested_batch_size_(batch_size),
      shuffle_(shuffle),
      stream_(stream) {
  if (!classes_) STRIDER_THROW(UsageError, std::string("the ") + mode_name + " sampler needs labels (a class index)");
  if (batch_size < 0) STRIDER_THROW(UsageError, "batch size must be >= 0, got " + std::to_string(batch_size));
}

void ClassListSampler::set_layout(std::vector<int> classes_in_use, std::int64_t total, bool drop_last) {
  classes_in_use_ = std::move(classes_in_use);
  const std::int64_t per_rank = total / world_size() + (total % world_size() != 0 ? 1 : 0);
  batch_size_ = requested_batch_size_ > 0 ? requested_batch_size_ : std::max<std::int64_t>(per_rank, 1);
  num_steps_ = classes_in_use_.empty() ? 0 : detail::fixed_batch_steps(total, global_batch_size(), drop_last);
  on_epoch();
}

void ClassListSampler::on_epoch() {
  auto cycler = std::make_shared<detail::ClassCycler>();
  cycler->build(*classes_, shuffle_, seed(), epoch(), stream_);
  cycler_ = std::move(cycler);
}

void ClassListSampler::deal(int label, std::int64_t first, std::int64_t count, std::uint64_t run_start,
                            std::vector<std::int64_t>& indices) const {
  detail::deal_run(*cycler_, label, first, count, run_start, world_size(), rank(), indices);
}

void ClassListSampler::finish_batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  if (shuffle_) detail::shuffle_batch(indices, seed(), epoch(), step, rank());
}

std::int64_t ClassListSampler::consumed_after(std::int64_t steps) const {
  return detail::fixed_batch_consumed(steps, num_steps_, global_batch_size());
}

std::int64_t ClassListSampler::step_for_consumed(std::int64_t consumed) const {
  return detail::fixed_batch_step_for(consumed, num_steps_, global_batch_size());
}

}  // namespace strider
