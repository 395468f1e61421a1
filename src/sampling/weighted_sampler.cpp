#include "strider/sampling/weighted_sampler.hpp"

#include <algorithm>
#include <cmath>

#include "sampling/class_plan.hpp"
#include "sampling/counter_lanes.hpp"
#include "sampling/key_sort.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/random.hpp"

namespace strider {

namespace {

constexpr std::uint64_t draw_stream = 0x3e1947ed00000000ULL;
constexpr double integer_total = 4611686018427387904.0;  // 2^62: the quantised weights' total

DistributedSamplerConfig position_config(const WeightedSamplerConfig& config) {
  std::int64_t draws = config.num_samples;
  if (draws == 0) {
    if (config.sample_weights)
      draws = static_cast<std::int64_t>(config.sample_weights->size());
    else if (config.classes)
      draws = config.classes->size();
  }
  DistributedSamplerConfig positions;
  positions.dataset_size = draws;
  positions.batch_size = config.batch_size;
  positions.shuffle = false;
  positions.drop_last = config.drop_last;
  positions.drop_last_batch = config.drop_last_batch;
  positions.seed = config.seed;
  return positions;
}

const WeightedSamplerConfig& checked(const WeightedSamplerConfig& config) {
  if (config.num_samples < 0)
    STRIDER_THROW(UsageError,
                  "the number of samples per epoch must be >= 0, got " + std::to_string(config.num_samples));
  if (!config.sample_weights && !config.classes)
    STRIDER_THROW(UsageError, "the weighted sampler needs labels (for class weights) or per-sample weights");
  return config;
}

}  // namespace

void check_weights(const std::vector<double>& weights, const std::string& what) {
  bool any_positive = false;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0)
      STRIDER_THROW(UsageError, what + " must be finite and >= 0: entry " + std::to_string(i) + " is " +
                                    std::to_string(weights[i]));
    any_positive = any_positive || weights[i] > 0;
  }
  if (!any_positive) STRIDER_THROW(UsageError, what + " are all zero (or none were given)");
}

WeightedSampler::WeightedSampler(const WeightedSamplerConfig& config, int world_size, int rank)
    : Sampler(world_size, rank, config.seed),
      config_(checked(config)),
      positions_(position_config(config), world_size, rank) {
  if (!config_.sample_weights && config_.class_weights.empty()) {
    const ClassIndex& index = *config_.classes;
    config_.class_weights.assign(static_cast<std::size_t>(index.num_classes()), 0.0);
    for (int label = 0; label < index.num_classes(); ++label)
      if (index.count(label) > 0)
        config_.class_weights[static_cast<std::size_t>(label)] = 1.0 / static_cast<double>(index.count(label));
  }
  build_cumulative();
}

void WeightedSampler::set_class_weights(std::vector<double> class_weights) {
  if (config_.sample_weights)
    STRIDER_THROW(UsageError, "this weighted sampler uses per-sample weights, not class weights");
  std::swap(config_.class_weights, class_weights);
  try {
    build_cumulative();
  } catch (...) {
    std::swap(config_.class_weights, class_weights);
    throw;
  }
}

void WeightedSampler::build_cumulative() {
  // Masses: w_c * count_c per class, or w_i per sample; quantised to integers of total ~2^62.
  std::vector<double> masses;
  if (config_.sample_weights) {
    masses = *config_.sample_weights;
    check_weights(masses, "sample weights");
    if (config_.classes && static_cast<std::int64_t>(masses.size()) != config_.classes->size())
      STRIDER_THROW(UsageError, "there are " + std::to_string(masses.size()) + " sample weights for " +
                                    std::to_string(config_.classes->size()) + " samples");
  } else {
    const ClassIndex& index = *config_.classes;
    if (static_cast<int>(config_.class_weights.size()) != index.num_classes())
      STRIDER_THROW(UsageError, "there are " + std::to_string(config_.class_weights.size()) + " class weights for " +
                                    std::to_string(index.num_classes()) + " classes");
    check_weights(config_.class_weights, "class weights");
    masses.resize(config_.class_weights.size());
    for (int label = 0; label < index.num_classes(); ++label)
      masses[static_cast<std::size_t>(label)] =
          config_.class_weights[static_cast<std::size_t>(label)] * static_cast<double>(index.count(label));
    check_weights(masses, "class weights of classes that have samples");
  }
  // Everything is made aside and swapped in at the end: a failure (an overflowing sum, no memory)
  // leaves the sampler as it was, for set_class_weights to restore the weights it had.
  Fnv1a64 weights_hash;  // the weights bit for bit, hashed once here rather than per config_hash()
  const std::vector<double>& weights = config_.sample_weights ? *config_.sample_weights : config_.class_weights;
  weights_hash.add(static_cast<std::uint8_t>(config_.sample_weights != nullptr));
  weights_hash.add(static_cast<std::int64_t>(weights.size()));
  weights_hash.add_bytes(weights.data(), weights.size() * sizeof(double));
  double total = 0;
  for (double mass : masses) total += mass;
  if (!std::isfinite(total)) STRIDER_THROW(UsageError, "the weights' sum overflows");
  std::vector<std::uint64_t> cumulative(masses.size());
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < masses.size(); ++i) {
    std::uint64_t quantised = 0;
    if (masses[i] > 0)
      quantised =
          std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(masses[i] / total * integer_total)));
    running += quantised;
    cumulative[i] = running;
  }
  // Per bucket of the tickets' top bits, the class of the bucket's first ticket: a ticket's class is
  // then that or, where a class's bound falls inside the bucket, one of the few after it. Only where
  // draw_samples looks a class up so (up to kTableClasses).
  const int ticket_shift = std::max(0, sampling_detail::bit_width(running - 1) - kTicketTableBits);
  std::vector<std::uint32_t> ticket_classes;
  if (cumulative.size() <= kTableClasses) {
    ticket_classes.assign(std::size_t{1} << kTicketTableBits, 0);
    for (std::size_t bucket = 0, label = 0; bucket < ticket_classes.size(); ++bucket) {
      const std::uint64_t first_ticket = static_cast<std::uint64_t>(bucket) << ticket_shift;
      while (label < cumulative.size() && cumulative[label] <= first_ticket) ++label;
      ticket_classes[bucket] = static_cast<std::uint32_t>(label);
    }
  }
  std::vector<ClassDraw> class_draws;
  if (!config_.sample_weights) {
    const ClassIndex& index = *config_.classes;
    for (int label = 0; label < index.num_classes(); ++label) {
      const auto count = static_cast<std::uint64_t>(index.count(label));
      class_draws.push_back(ClassDraw{index.members(label), count, detail::CounterStream::mask_of(count)});
    }
  }
  weights_hash_ = weights_hash.value();
  cumulative_.swap(cumulative);
  ticket_classes_.swap(ticket_classes);
  ticket_shift_ = ticket_shift;
  class_draws_.swap(class_draws);
}

double WeightedSampler::class_probability(int label) const {
  if (config_.sample_weights || label < 0 || label >= static_cast<int>(cumulative_.size())) return 0.0;
  const std::uint64_t before = label == 0 ? 0 : cumulative_[static_cast<std::size_t>(label) - 1];
  return static_cast<double>(cumulative_[static_cast<std::size_t>(label)] - before) /
         static_cast<double>(cumulative_.back());
}

std::int64_t WeightedSampler::sample_at(std::int64_t position) const {
  std::int64_t sample = position;
  draw_samples(derive_seed(seed(), epoch(), draw_stream), &sample, 1);
  return sample;
}

void WeightedSampler::draw_samples(std::uint64_t key, std::int64_t* positions, std::size_t count) const {
  // Position p's stream (key, p) draws a ticket that picks the class (or the sample) by weight,
  // then with class weights the member of that class. A group of positions at a time, each step
  // over the whole group: the streams and their words in vectorized lanes (counter_lanes.hpp),
  // then the classes, then the members, random accesses into the class index (8 bytes a sample)
  // fetched while the rest of the group is drawn, then read.
  constexpr std::size_t kGroup = 32;
  const sampling_detail::CounterLaneBuild& lanes = sampling_detail::counter_lane_builds().front();
  const std::uint64_t total = cumulative_.back();
  std::uint64_t totals[kGroup], total_masks[kGroup];
  std::fill_n(totals, kGroup, total);
  std::fill_n(total_masks, kGroup, detail::CounterStream::mask_of(total));
  // The first cumulative weight above the ticket: over a few classes, the table's count for the
  // ticket's bucket, then a step past a bound inside the bucket taken without a branch (a bucket
  // rarely holds two); by binary search over many (sample weights).
  const std::uint64_t* const cumulative = cumulative_.data();
  const std::size_t bounds = cumulative_.size();
  const std::uint32_t* const table = ticket_classes_.data();
  const int shift = ticket_shift_;
  const auto chosen_by = [&](std::uint64_t ticket) {
    if (bounds <= kTableClasses) {
      // ticket < total = cumulative[bounds - 1]: no step passes the last bound.
      std::size_t at_or_below = table[static_cast<std::size_t>(ticket >> shift)];
      at_or_below += cumulative[at_or_below] <= ticket ? 1 : 0;
      while (cumulative[at_or_below] <= ticket) ++at_or_below;
      return at_or_below;
    }
    return static_cast<std::size_t>(std::upper_bound(cumulative, cumulative + bounds, ticket) - cumulative);
  };
  std::uint64_t states[kGroup], drawn[kGroup], values[kGroup], counts[kGroup], masks[kGroup];
  const std::int64_t* members[kGroup];
  // Lanes whose every word the lanes drew was rejected draw on one word at a time (a ticket in 8
  // where the total is just past a power of two, as 1/count weights' often is).
  const auto draw_on = [&](std::size_t group, const std::uint64_t* group_bounds, const std::uint64_t* group_masks) {
    for (std::size_t k = 0; k < group; ++k) {
      if (values[k] < group_bounds[k]) continue;
      detail::CounterStream stream = detail::CounterStream::resumed(states[k], drawn[k]);
      values[k] = stream.below(group_bounds[k], group_masks[k]);
      drawn[k] = stream.drawn();
    }
  };
  const ClassDraw* const draws = class_draws_.data();
  for (std::size_t first = 0; first < count; first += kGroup) {
    const std::size_t group = std::min(kGroup, count - first);
    lanes.streams(key, positions + first, states, group);
    std::fill_n(drawn, group, 0);
    // A ticket from 3 words: a total just past 2^62 rejects nearly half of them.
    lanes.below3(states, drawn, totals, total_masks, values, group);
    draw_on(group, totals, total_masks);
    if (config_.sample_weights) {
      for (std::size_t k = 0; k < group; ++k) positions[first + k] = static_cast<std::int64_t>(chosen_by(values[k]));
      continue;
    }
    for (std::size_t k = 0; k < group; ++k) {
      const ClassDraw& draw = draws[chosen_by(values[k])];
      counts[k] = draw.count;
      masks[k] = draw.mask;
      members[k] = draw.members;
    }
    lanes.below2(states, drawn, counts, masks, values, group);
    draw_on(group, counts, masks);
    for (std::size_t k = 0; k < group; ++k) {
      members[k] += values[k];
      __builtin_prefetch(members[k]);
    }
    for (std::size_t k = 0; k < group; ++k) positions[first + k] = *members[k];
  }
}

void WeightedSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  positions_.batch(step, indices);  // global positions of this rank's batch
  draw_samples(derive_seed(seed(), epoch(), draw_stream), indices.data(), indices.size());
}

std::uint64_t WeightedSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(config_.classes ? config_.classes->labels_hash() : 0);
  hash.add(weights_hash_);
  hash.add(positions_.config().dataset_size);
  hash.add(static_cast<std::uint8_t>(config_.drop_last));
  hash.add(static_cast<std::uint8_t>(config_.drop_last_batch));
  hash.add(config_.seed);
  return hash.value();
}

}  // namespace strider
