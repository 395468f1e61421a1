#pragma once
// The host-side bookkeeping of a backend's device slots for batches: which slot holds which staged
// batch, which slot the next copy goes to, and forgetting staged batches whose host memory may be
// reused. No CUDA here: the CUDA backend pairs each slot with device memory and events, and the unit
// tests drive this alone.
//
// A staged batch is known only by its host pointers and shape (StagingKey). Pointers are reused: the
// prefetcher's ring hands out the same buffers again and again. So a staged copy is valid only while
// the batch that was staged still lives in that memory; whoever releases that memory first calls
// forget() (Backend::unstage), and after any failure the backend calls forget_all().

#include <cstdint>
#include <vector>

#include "strider/device/batch_input.hpp"

namespace strider::detail {

/// What identifies a batch handed to stage(): its host pointers and its shape.
struct StagingKey {
  const void* samples = nullptr;
  int type = 0;
  std::int64_t count = 0;
  std::int64_t features = 0;
  const void* labels = nullptr;
  const void* offsets = nullptr;

  StagingKey() = default;
  explicit StagingKey(const BatchInput& input);
  bool operator==(const StagingKey& other) const noexcept;
  bool operator!=(const StagingKey& other) const noexcept { return !(*this == other); }
};

/// Which of a fixed number of slots holds what. One thread at a time.
class StagingSlots {
 public:
  explicit StagingSlots(int slots);

  int size() const noexcept { return static_cast<int>(slots_.size()); }

  /// The slot that holds a staged (not yet consumed) copy of `key`, or -1.
  int find_staged(const StagingKey& key) const noexcept;

  /// The slot a new copy goes to: one that holds no staged batch (the one filled longest ago), else
  /// the slot staged first, whose staged batch is dropped (a step that asks for it copies it again).
  /// Sets *dropped (when not null) to whether a staged batch was dropped.
  int choose_for_copy(bool* dropped = nullptr) noexcept;

  /// `slot` now holds a copy of `key`: staged (kept for a later step) or not (the step that copied
  /// it consumes it). Returns the copy's serial number (0, 1, 2, ... over all slots).
  std::int64_t filled(int slot, const StagingKey& key, bool staged) noexcept;

  /// A step consumed `slot`'s batch: it no longer counts as staged.
  void consumed(int slot) noexcept;

  /// Forgets the staged copy of `key`, if any; returns its slot (the caller waits for its copy to
  /// finish reading host memory) or -1.
  int forget(const StagingKey& key) noexcept;

  /// Forgets every staged copy (after a failure: no staged batch's memory can be trusted any more);
  /// returns how many there were.
  int forget_all() noexcept;

  bool staged(int slot) const noexcept { return slots_[static_cast<std::size_t>(slot)].staged; }
  std::int64_t serial(int slot) const noexcept { return slots_[static_cast<std::size_t>(slot)].serial; }

 private:
  struct Entry {
    StagingKey key;
    bool staged = false;
    std::int64_t serial = -1;       // the copy it holds (-1: never filled)
    std::int64_t stage_order = -1;  // when it was staged
  };
  std::vector<Entry> slots_;
  std::int64_t next_serial_ = 0;
  std::int64_t next_stage_order_ = 0;
};

}  // namespace strider::detail
