#include "strider/sampling/balanced_sampler.hpp"

#include <algorithm>
#include <charconv>

#include "sampling/class_plan.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"

namespace strider {

namespace {
constexpr std::uint64_t class_list_stream = 0xba1a000000000000ULL;
}  // namespace

void parse_balance(const std::string& text, BalancedSamplerConfig& config) {
  if (text == "max") {
    config.target = BalanceTarget::max;
    return;
  }
  if (text == "min") {
    config.target = BalanceTarget::min;
    return;
  }
  std::int64_t count = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (status != std::errc() || end != text.data() + text.size() || count <= 0)
    STRIDER_THROW(UsageError, "--balance must be max, min or a positive count per class, got '" + text + "'");
  config.target = BalanceTarget::count;
  config.per_class = count;
}

BalancedSampler::BalancedSampler(const BalancedSamplerConfig& config, int world_size, int rank)
    : Sampler(world_size, rank, config.seed), config_(config) {
  if (!config.classes) STRIDER_THROW(UsageError, "the balanced sampler needs labels (a class index)");
  if (config.batch_size < 0)
    STRIDER_THROW(UsageError, "batch size must be >= 0, got " + std::to_string(config.batch_size));
  const ClassIndex& index = *config.classes;
  present_ = detail::classes_with_samples(index);
  switch (config.target) {
    case BalanceTarget::max:
      for (int label : present_) per_class_ = std::max(per_class_, index.count(label));
      break;
    case BalanceTarget::min:
      per_class_ = present_.empty() ? 0 : index.count(present_[0]);
      for (int label : present_) per_class_ = std::min(per_class_, index.count(label));
      break;
    case BalanceTarget::count:
      if (config.per_class <= 0)
        STRIDER_THROW(UsageError, "the balanced per-class count must be positive, got " + std::to_string(config.per_class));
      per_class_ = config.per_class;
      break;
  }
  const auto classes = static_cast<std::int64_t>(present_.size());
  const std::int64_t total = classes * per_class_;
  const std::int64_t per_rank = total / world_size + (total % world_size != 0 ? 1 : 0);
  batch_size_ = config.batch_size > 0 ? config.batch_size : std::max<std::int64_t>(per_rank, 1);
  num_steps_ = detail::fixed_batch_steps(total, global_batch_size(), config.drop_last);
  on_epoch();
}

void BalancedSampler::on_epoch() {
  auto cycler = std::make_shared<detail::ClassCycler>();
  cycler->build(*config_.classes, config_.shuffle, seed(), epoch(), class_list_stream);
  cycler_ = std::move(cycler);
}

void BalancedSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  indices.clear();
  indices.reserve(static_cast<std::size_t>(batch_size_));
  const auto classes = static_cast<std::uint64_t>(present_.size());
  const auto global = static_cast<std::uint64_t>(global_batch_size());
  const auto k = static_cast<std::uint64_t>(step);
  for (std::uint64_t c = 0; c < classes; ++c) {
    // Class c's occurrences before step k: the sum of v over the window [c, c+k) of the cyclic
    // even split v of G into K parts, i.e. floor((c+k)G/K) - floor(cG/K). Its run starts at rank
    // position floor((c+k)G/K), right after class c-1's run.
    const std::uint64_t run_start = detail::mul_div(c + k, global, classes);
    const std::uint64_t run_end = detail::mul_div(c + k + 1, global, classes);
    const std::uint64_t before = run_start - detail::mul_div(c, global, classes);
    detail::deal_run(*cycler_, present_[c], static_cast<std::int64_t>(before),
                     static_cast<std::int64_t>(run_end - run_start), run_start, world_size(), rank(), indices);
  }
  if (config_.shuffle) detail::shuffle_batch(indices, seed(), epoch(), step, rank());
}

std::int64_t BalancedSampler::consumed_after(std::int64_t steps) const {
  return detail::fixed_batch_consumed(steps, num_steps_, global_batch_size());
}

std::int64_t BalancedSampler::step_for_consumed(std::int64_t consumed) const {
  return detail::fixed_batch_step_for(consumed, num_steps_, global_batch_size());
}

std::uint64_t BalancedSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(config_.classes->labels_hash());
  hash.add(static_cast<std::int32_t>(config_.target));
  hash.add(per_class_);
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  hash.add(static_cast<std::uint8_t>(config_.drop_last));
  hash.add(config_.seed);
  return hash.value();
}

}  // namespace strider
