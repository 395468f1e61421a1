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
    : ClassListSampler(config.classes, config.batch_size, config.shuffle, class_list_stream, world_size, rank,
                       config.seed, "balanced"),
      config_(config) {
  std::vector<int> present = detail::classes_with_samples(classes());
  switch (config.target) {
    case BalanceTarget::max:
      for (int label : present) per_class_ = std::max(per_class_, classes().count(label));
      break;
    case BalanceTarget::min:
      per_class_ = present.empty() ? 0 : classes().count(present[0]);
      for (int label : present) per_class_ = std::min(per_class_, classes().count(label));
      break;
    case BalanceTarget::count:
      if (config.per_class <= 0)
        STRIDER_THROW(UsageError,
                      "the balanced per-class count must be positive, got " + std::to_string(config.per_class));
      per_class_ = config.per_class;
      break;
  }
  const std::int64_t total = static_cast<std::int64_t>(present.size()) * per_class_;
  set_layout(std::move(present), total, config.drop_last);
}

void BalancedSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  indices.clear();
  indices.reserve(static_cast<std::size_t>(batch_size()));
  const auto count = static_cast<std::uint64_t>(classes_in_use().size());
  const auto global = static_cast<std::uint64_t>(global_batch_size());
  const auto k = static_cast<std::uint64_t>(step);
  for (std::uint64_t c = 0; c < count; ++c) {
    // Class c's occurrences before step k: the sum of v over the window [c, c+k) of the cyclic
    // even split v of G into K parts, i.e. floor((c+k)G/K) - floor(cG/K). Its run starts at rank
    // position floor((c+k)G/K), right after class c-1's run.
    const std::uint64_t run_start = detail::mul_div(c + k, global, count);
    const std::uint64_t run_end = detail::mul_div(c + k + 1, global, count);
    const std::uint64_t before = run_start - detail::mul_div(c, global, count);
    deal(classes_in_use()[c], static_cast<std::int64_t>(before), static_cast<std::int64_t>(run_end - run_start),
         run_start, indices);
  }
  finish_batch(step, indices);
}

std::uint64_t BalancedSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(classes().labels_hash());
  hash.add(static_cast<std::int32_t>(config_.target));
  hash.add(per_class_);
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  hash.add(static_cast<std::uint8_t>(config_.drop_last));
  hash.add(config_.seed);
  return hash.value();
}

}  // namespace strider
