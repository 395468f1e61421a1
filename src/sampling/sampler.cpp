#include "strider/sampling/sampler.hpp"

#include <charconv>
#include <sstream>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"

namespace strider {

namespace {

template <typename T>
T parse_number(std::string_view text, std::string_view field) {
  T value{};
  const auto [end, status] =
      std::from_chars(text.data(), text.data() + text.size(), value, field == "config" ? 16 : 10);
  if (status != std::errc() || end != text.data() + text.size())
    STRIDER_THROW(DataError, "sampler state: bad value '" + std::string(text) + "' for " + std::string(field));
  return value;
}

}  // namespace

std::string SamplerState::serialize() const {
  std::ostringstream text;
  text << "mode=" << mode << " config=" << std::hex << config_hash << std::dec << " seed=" << seed << " epoch=" << epoch
       << " consumed=" << consumed << " global_batch=" << global_batch_size;
  return text.str();
}

SamplerState SamplerState::parse(std::string_view text) {
  SamplerState state;
  int fields_seen = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find(' ', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view field = text.substr(begin, end - begin);
    begin = end + 1;
    if (field.empty()) continue;
    const std::size_t equals = field.find('=');
    if (equals == std::string_view::npos)
      STRIDER_THROW(DataError, "sampler state: no '=' in '" + std::string(field) + "'");
    const std::string_view key = field.substr(0, equals), value = field.substr(equals + 1);
    if (key == "mode")
      state.mode = std::string(value);
    else if (key == "config")
      state.config_hash = parse_number<std::uint64_t>(value, key);
    else if (key == "seed")
      state.seed = parse_number<std::int64_t>(value, key);
    else if (key == "epoch")
      state.epoch = parse_number<std::int64_t>(value, key);
    else if (key == "consumed")
      state.consumed = parse_number<std::int64_t>(value, key);
    else if (key == "global_batch")
      state.global_batch_size = parse_number<std::int64_t>(value, key);
    else
      STRIDER_THROW(DataError, "sampler state: unknown field '" + std::string(key) + "'");
    ++fields_seen;
  }
  if (fields_seen != 6 || state.mode.empty())
    STRIDER_THROW(DataError, "sampler state: expected 6 fields (mode config seed epoch consumed global_batch) in '" +
                                 std::string(text) + "'");
  return state;
}

bool SamplerState::operator==(const SamplerState& other) const {
  return mode == other.mode && config_hash == other.config_hash && seed == other.seed && epoch == other.epoch &&
         consumed == other.consumed && global_batch_size == other.global_batch_size;
}

Sampler::Sampler(int world_size, int rank, std::int64_t seed) : world_size_(world_size), rank_(rank), seed_(seed) {
  if (world_size <= 0) STRIDER_THROW(UsageError, "world size must be positive, got " + std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    STRIDER_THROW(UsageError, "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world_size) + ")");
}

void Sampler::set_epoch(std::int64_t epoch) {
  if (epoch < 0) STRIDER_THROW(UsageError, "epoch must be >= 0, got " + std::to_string(epoch));
  epoch_ = epoch;
  on_epoch();
}

void Sampler::check_step(std::int64_t step) const {
  if (step < 0 || step >= num_steps())
    STRIDER_THROW(UsageError,
                  "step " + std::to_string(step) + " is outside the epoch's " + std::to_string(num_steps()) + " steps");
}

SamplerState Sampler::state(std::int64_t steps_done) const {
  if (steps_done < 0 || steps_done > num_steps())
    STRIDER_THROW(UsageError, "cannot save a state after step " + std::to_string(steps_done) + " of " +
                                  std::to_string(num_steps()));
  return SamplerState{mode(), config_hash(), seed_, epoch_, consumed_after(steps_done), global_batch_size()};
}

std::int64_t Sampler::resume(const SamplerState& saved) {
  if (saved.mode != mode())
    STRIDER_THROW(UsageError, "the saved state is of sampler '" + saved.mode + "', this run uses '" + mode() + "'");
  if (saved.seed != seed_)
    STRIDER_THROW(UsageError, "the saved state has seed " + std::to_string(saved.seed) + ", this run uses " +
                                  std::to_string(seed_));
  if (saved.config_hash != config_hash())
    STRIDER_THROW(UsageError, std::string("the saved state's sampler configuration differs from this run's (dataset "
                                          "size or sampler options changed") +
                                  (mode() == "block" ? "; the block plan depends on the world size, so it resumes "
                                                       "only at the one it was saved at)"
                                                     : ")"));
  if (saved.global_batch_size != global_batch_size())
    STRIDER_THROW(UsageError, "the saved state has a global batch of " + std::to_string(saved.global_batch_size) +
                                  " samples, this run has " + std::to_string(global_batch_size()) +
                                  " (world size x per-rank batch must stay the same to resume)");
  set_epoch(saved.epoch);
  return step_for_consumed(saved.consumed);
}

std::int64_t per_rank_batch_for(std::int64_t global_batch, int world_size) {
  if (world_size <= 0) STRIDER_THROW(UsageError, "world size must be positive, got " + std::to_string(world_size));
  if (global_batch <= 0 || global_batch % world_size != 0)
    STRIDER_THROW(UsageError, "a global batch of " + std::to_string(global_batch) + " samples cannot be split over " +
                                  std::to_string(world_size) + " ranks");
  return global_batch / world_size;
}

std::uint64_t plan_hash(const Sampler& sampler) {
  Fnv1a64 hash;
  std::vector<std::int64_t> indices;
  for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
    sampler.batch(step, indices);
    hash.add(static_cast<std::int64_t>(indices.size()));
    for (std::int64_t index : indices) hash.add(index);
  }
  return hash.value();
}

}  // namespace strider
