#include "strider/sampling/stratified_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "sampling/class_plan.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/weighted_sampler.hpp"

namespace strider {

namespace {

constexpr std::uint64_t class_list_stream = 0x57a7000000000000ULL;
constexpr double weight_scale = 1099511627776.0;  // 2^40: resolution of given target weights
__extension__ using int128 = __int128;

}  // namespace

void parse_stratify_target(const std::string& text, StratifiedSamplerConfig& config) {
  config.target_weights.clear();
  if (text == "freq") {
    config.target = StratifyTarget::freq;
    return;
  }
  if (text == "uniform") {
    config.target = StratifyTarget::uniform;
    return;
  }
  config.target = StratifyTarget::weights;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    char* parsed_end = nullptr;
    const double value = item.empty() ? 0.0 : std::strtod(item.c_str(), &parsed_end);
    if (item.empty() || parsed_end != item.c_str() + item.size())
      STRIDER_THROW(UsageError,
                    "--stratify-target must be freq, uniform or comma-separated weights, got '" + text + "'");
    config.target_weights.push_back(value);
    begin = end + 1;
  }
}

StratifiedSampler::StratifiedSampler(const StratifiedSamplerConfig& config, int world_size, int rank)
    : ClassListSampler(config.classes, config.batch_size, config.shuffle, class_list_stream, world_size, rank,
                       config.seed, "stratified"),
      config_(config) {
  if (config.num_samples < 0)
    STRIDER_THROW(UsageError,
                  "the number of samples per epoch must be >= 0, got " + std::to_string(config.num_samples));
  const ClassIndex& index = classes();
  const int class_count = index.num_classes();
  if (config.target == StratifyTarget::weights) {
    if (static_cast<int>(config.target_weights.size()) != class_count)
      STRIDER_THROW(UsageError, "there are " + std::to_string(config.target_weights.size()) +
                                    " stratification weights for " + std::to_string(class_count) + " classes");
    check_weights(config.target_weights, "stratification weights");
  }
  double weight_sum = 0;
  for (double weight : config.target_weights) weight_sum += weight;
  std::vector<int> present;
  for (int label = 0; label < class_count; ++label) {
    std::uint64_t weight = 0;
    switch (config.target) {
      case StratifyTarget::freq:
        weight = static_cast<std::uint64_t>(index.count(label));
        break;
      case StratifyTarget::uniform:
        weight = index.count(label) > 0 ? 1 : 0;
        break;
      case StratifyTarget::weights: {
        const double given = config.target_weights[static_cast<std::size_t>(label)];
        if (given > 0 && index.count(label) == 0)
          STRIDER_THROW(UsageError, "class " + std::to_string(label) + " has a stratification weight but no samples");
        if (given > 0)
          weight =
              std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(given / weight_sum * weight_scale)));
        break;
      }
    }
    if (weight == 0) continue;
    present.push_back(label);
    weights_.push_back(weight);
    weight_total_ += weight;
  }
  const auto in_use = static_cast<std::int64_t>(present.size());
  set_layout(std::move(present), config.num_samples > 0 ? config.num_samples : index.size(), config.drop_last);
  if (in_use > 0 && batch_size() < in_use)
    STRIDER_THROW(UsageError, "a stratified batch must hold every class: the per-rank batch size " +
                                  std::to_string(batch_size()) + " is smaller than the " + std::to_string(in_use) +
                                  " classes in the target");
  deal_order_.resize(weights_.size());
  for (std::size_t c = 0; c < deal_order_.size(); ++c) deal_order_[c] = c;
  std::stable_sort(deal_order_.begin(), deal_order_.end(),
                   [&](std::size_t a, std::size_t b) { return weights_[a] < weights_[b]; });
  plan_compositions();
}

void StratifiedSampler::plan_compositions() {
  // floor(G*p_c) of each class, plus one for the F classes with the largest running deficit among
  // those whose quota has a fractional part (exact integer arithmetic).
  const auto global = static_cast<std::uint64_t>(global_batch_size());
  const std::size_t count = classes_in_use().size();
  std::vector<std::uint64_t> base(count);
  std::vector<int128> remainder(count);
  std::uint64_t ups = global;
  std::vector<std::size_t> candidates;
  for (std::size_t c = 0; c < count; ++c) {
    const detail::uint128 quota = static_cast<detail::uint128>(global) * weights_[c];
    base[c] = static_cast<std::uint64_t>(quota / weight_total_);
    remainder[c] = static_cast<int128>(quota % weight_total_);
    ups -= base[c];
    if (remainder[c] > 0) candidates.push_back(c);
  }
  before_.assign(static_cast<std::size_t>(num_steps() + 1) * count, 0);
  std::vector<int128> deficit(count, 0);
  for (std::int64_t step = 0; step < num_steps(); ++step) {
    for (std::size_t c : candidates) deficit[c] += remainder[c];
    const auto more = [&](std::size_t a, std::size_t b) {
      return deficit[a] != deficit[b] ? deficit[a] > deficit[b] : a < b;
    };
    std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(ups), candidates.end(), more);
    const std::int64_t* previous = &before_[static_cast<std::size_t>(step) * count];
    std::int64_t* next = &before_[static_cast<std::size_t>(step + 1) * count];
    for (std::size_t c = 0; c < count; ++c) next[c] = previous[c] + static_cast<std::int64_t>(base[c]);
    for (std::size_t i = 0; i < ups; ++i) {
      ++next[candidates[i]];
      deficit[candidates[i]] -= static_cast<int128>(weight_total_);
    }
    std::sort(candidates.begin(), candidates.end());  // a canonical order for the next step
  }
}

double StratifiedSampler::target_proportion(int label) const {
  const auto& present = classes_in_use();
  const auto found = std::find(present.begin(), present.end(), label);
  if (found == present.end()) return 0.0;
  return static_cast<double>(weights_[static_cast<std::size_t>(found - present.begin())]) /
         static_cast<double>(weight_total_);
}

std::int64_t StratifiedSampler::global_count(std::int64_t step, int label) const {
  check_step(step);
  const auto& present = classes_in_use();
  const auto found = std::find(present.begin(), present.end(), label);
  if (found == present.end()) return 0;
  const std::size_t count = present.size(), c = static_cast<std::size_t>(found - present.begin());
  return before_[static_cast<std::size_t>(step + 1) * count + c] - before_[static_cast<std::size_t>(step) * count + c];
}

void StratifiedSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  indices.clear();
  indices.reserve(static_cast<std::size_t>(batch_size()));
  const std::size_t count = classes_in_use().size();
  const std::int64_t* previous = &before_[static_cast<std::size_t>(step) * count];
  const std::int64_t* next = previous + count;
  // Runs laid out class by class, rarest first, from where the previous step's runs of every class
  // but the most frequent ended: those classes together, and so the most frequent too, go round
  // the ranks in turn, so every rank's epoch holds about the same count of each.
  std::uint64_t run_start = 0;
  for (std::size_t i = 0; i + 1 < count; ++i) run_start += static_cast<std::uint64_t>(previous[deal_order_[i]]);
  for (std::size_t c : deal_order_) {
    const std::int64_t run = next[c] - previous[c];
    deal(classes_in_use()[c], previous[c], run, run_start, indices);
    run_start += static_cast<std::uint64_t>(run);
  }
  finish_batch(step, indices);
}

std::uint64_t StratifiedSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(classes().labels_hash());
  hash.add(static_cast<std::int32_t>(config_.target));
  for (std::size_t c = 0; c < classes_in_use().size(); ++c) {
    hash.add(static_cast<std::int64_t>(classes_in_use()[c]));
    hash.add(weights_[c]);
  }
  hash.add(config_.num_samples > 0 ? config_.num_samples : classes().size());
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  hash.add(static_cast<std::uint8_t>(config_.drop_last));
  hash.add(config_.seed);
  return hash.value();
}

}  // namespace strider
