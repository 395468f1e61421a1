#pragma once
/// \file
/// The batches a training loop holds around one step: the current one and, with a backend that
/// overlaps copies (Backend::overlaps_copies), the next one, already staged on the device so that its
/// copy runs while the current step computes. It gives every staged batch back to the backend
/// (Backend::unstage) before releasing it, so that no copy can still read a buffer the prefetcher
/// refills, whether the loop ends, breaks or unwinds through an exception.
///
///   StepBatches<Batch> batches(*backend, backend->overlaps_copies());
///   for (std::int64_t step = first; step < steps; ++step) {
///     Batch* batch = batches.advance([&] { return prefetcher.next(); },
///                                    [&](const Batch& b) { return batch_input(b, info); }, step + 1 < steps);
///     backend->forward_backward(batch_input(*batch, info));     // finds its copy staged
///     ...
///   }
///
/// With staging the loop holds two batches at once: give the prefetcher a ring of at least three
/// (prefetch_depth(..., batches_held = 2)) so that its I/O thread can read the one after.

#include <optional>
#include <utility>

#include "strider/device/backend.hpp"

namespace strider {

/// Holds the current batch and the staged next one. BatchT is any movable batch type (the
/// prefetcher's Batch); its destructor releases it. One thread; not collective.
template <typename BatchT>
class StepBatches {
 public:
  /// stage_next: stage the next batch while a step runs (usually backend.overlaps_copies()).
  StepBatches(Backend& backend, bool stage_next) noexcept : backend_(backend), stage_next_(stage_next) {}
  /// Unstages what it staged, then releases the batches. Never throws.
  ~StepBatches() {
    release(next_);
    release(current_);
  }
  StepBatches(const StepBatches&) = delete;
  StepBatches& operator=(const StepBatches&) = delete;

  /// Moves to the next step and returns its batch (owned here until the next advance()), or nullptr
  /// when fetch() has none. The previous current batch is unstaged and released; the staged batch
  /// becomes current, or fetch() supplies it. Then, with staging on and `another_follows`, fetch()
  /// supplies the next batch, which is staged (backend.stage(input_of(next))) and held.
  /// fetch: () -> std::optional<BatchT>; input_of: (const BatchT&) -> BatchInput.
  template <typename Fetch, typename InputOf>
  BatchT* advance(Fetch&& fetch, InputOf&& input_of, bool another_follows) {
    release(current_);
    if (next_.batch) {
      current_ = std::move(next_);
      next_ = Held{};
    } else {
      current_.batch = fetch();
    }
    if (!current_.batch) return nullptr;
    if (stage_next_ && another_follows) {
      std::optional<BatchT> next = fetch();
      if (next) {
        next_.batch = std::move(next);
        next_.staged_input = input_of(*next_.batch);
        next_.staged = true;  // before stage(): a stage that throws may have started the copy
        backend_.stage(next_.staged_input);
      }
    }
    return &*current_.batch;
  }

  /// The current batch, or nullptr.
  BatchT* current() noexcept { return current_.batch ? &*current_.batch : nullptr; }
  /// Whether a staged next batch is held.
  bool holds_next() const noexcept { return next_.batch.has_value(); }

 private:
  struct Held {
    std::optional<BatchT> batch;
    BatchInput staged_input;  // what backend.stage() got, when staged
    bool staged = false;
  };

  /// Unstages (a no-op where a step consumed the staged copy) and releases one held batch.
  void release(Held& held) noexcept {
    if (held.staged) backend_.unstage(held.staged_input);
    held = Held{};
  }

  Backend& backend_;
  bool stage_next_;
  Held current_;
  Held next_;
};

}  // namespace strider
