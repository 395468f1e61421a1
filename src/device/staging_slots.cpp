#include "device/staging_slots.hpp"

#include "strider/core/error.hpp"

namespace strider::detail {

StagingKey::StagingKey(const BatchInput& input)
    : samples(input.samples),
      type(static_cast<int>(input.type)),
      count(input.count),
      features(input.features),
      labels(input.labels),
      offsets(input.offsets) {}

bool StagingKey::operator==(const StagingKey& other) const noexcept {
  return samples == other.samples && type == other.type && count == other.count && features == other.features &&
         labels == other.labels && offsets == other.offsets;
}

StagingSlots::StagingSlots(int slots) : slots_(static_cast<std::size_t>(slots)) {
  STRIDER_REQUIRE(slots >= 1, "a backend needs at least one batch slot");
}

int StagingSlots::find_staged(const StagingKey& key) const noexcept {
  for (std::size_t slot = 0; slot < slots_.size(); ++slot)
    if (slots_[slot].staged && slots_[slot].key == key) return static_cast<int>(slot);
  return -1;
}

int StagingSlots::choose_for_copy(bool* dropped) noexcept {
  int best = -1;
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot].staged) continue;
    if (best < 0 || slots_[slot].serial < slots_[static_cast<std::size_t>(best)].serial) best = static_cast<int>(slot);
  }
  if (dropped != nullptr) *dropped = best < 0;
  if (best >= 0) return best;
  best = 0;
  for (std::size_t slot = 1; slot < slots_.size(); ++slot)
    if (slots_[slot].stage_order < slots_[static_cast<std::size_t>(best)].stage_order) best = static_cast<int>(slot);
  slots_[static_cast<std::size_t>(best)].staged = false;
  return best;
}

std::int64_t StagingSlots::filled(int slot, const StagingKey& key, bool staged) noexcept {
  Entry& entry = slots_[static_cast<std::size_t>(slot)];
  entry.key = key;
  entry.staged = staged;
  entry.serial = next_serial_++;
  entry.stage_order = staged ? next_stage_order_++ : -1;
  return entry.serial;
}

void StagingSlots::consumed(int slot) noexcept {
  slots_[static_cast<std::size_t>(slot)].staged = false;
}

int StagingSlots::forget(const StagingKey& key) noexcept {
  const int slot = find_staged(key);
  if (slot >= 0) slots_[static_cast<std::size_t>(slot)].staged = false;
  return slot;
}

int StagingSlots::forget_all() noexcept {
  int forgotten = 0;
  for (Entry& entry : slots_) {
    forgotten += entry.staged ? 1 : 0;
    entry.staged = false;
  }
  return forgotten;
}

}  // namespace strider::detail
