#pragma once
/// \file
/// An epoch's shuffled order, or a whole epoch plan, made once for several ranks. Every rank of the distributed sampler
/// needs only its own positions of torch's permutation, yet shuffling costs a pass of random
/// accesses over all N entries; the Loader shuffles once per node (its first rank, into memory the
/// node's ranks share) and each rank copies out its positions (pipeline/node_order.hpp).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace strider {

/// Where the distributed sampler (DistributedSamplerConfig::shared_order) takes its positions of
/// the epoch's permutation from, instead of shuffling all N itself. An implementation gives exactly
/// torch_randperm's entries, computing them where its shared copy is missing or late, so batches
/// are the same with or without one.
class SharedOrder {
 public:
  virtual ~SharedOrder() = default;
  /// out[k] = torch_randperm(n, seed)[(first + k * stride) mod n] for k in [0, count): the positions
  /// rank `first` of `stride` ranks takes (with torch's padding from the order's start).
  /// Thread-safe. Throws std::bad_alloc where the order cannot be held.
  virtual void take(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
                    std::int64_t* out) = 0;
};

/// Where a sampler whose epoch plan is the same on every rank (the bucketed sampler:
/// SamplerOptions::shared_plan) takes it from, instead of making it on every rank: one rank of the
/// node makes each epoch's plan and the others copy it (pipeline/node_order.hpp). An implementation
/// makes the plan on the calling rank wherever the shared copy is missing, late, too large or not
/// usable, so plans are the same with or without one.
class SharedPlan {
 public:
  /// A part of a plan, as the rank that made it holds it.
  struct Piece {
    const void* data = nullptr;
    std::int64_t bytes = 0;
  };
  virtual ~SharedPlan() = default;
  /// Gives this rank the plan named `key` (never 0). Where this rank makes it (its turn: `turn`
  /// modulo the node's ranks) or no copy can be had, `make` plans on this rank; after `make` on
  /// the rank whose turn it is, `pieces()` are published, one after the other, for the node's other
  /// ranks. Elsewhere the node's copy goes to `load`, which returns false for bytes it cannot use
  /// (then `make` runs). A rank that is to wait for the plan while the next (turn + 1) is its own
  /// first calls `ahead`, to do some of that plan's work meanwhile (null: nothing), and calls it
  /// again instead of idling while it waits, as long as it returns true (more of that work is left;
  /// each call a short slice of it). Thread-safe; what `make` throws propagates.
  virtual void share(std::uint64_t key, std::uint64_t turn, const std::function<void()>& make,
                     const std::function<std::vector<Piece>()>& pieces,
                     const std::function<bool(const std::byte* data, std::int64_t bytes)>& load,
                     const std::function<bool()>& ahead) = 0;
};

/// out[k] = order[(first + k * stride) mod n] for k in [0, count): a rank's positions of an order of n
/// entries (n > 0).
void take_positions(const std::int64_t* order, std::int64_t n, std::uint64_t first, std::uint64_t stride,
                    std::int64_t count, std::int64_t* out) noexcept;

}  // namespace strider
