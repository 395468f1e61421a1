#pragma once
/// \file
/// An epoch's shuffled order made once for several ranks. Every rank of the distributed sampler
/// needs only its own positions of torch's permutation, yet shuffling costs a pass of random
/// accesses over all N entries; the Loader shuffles once per node (its first rank, into memory the
/// node's ranks share) and each rank copies out its positions (pipeline/node_order.hpp).

#include <cstdint>

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

/// out[k] = order[(first + k * stride) mod n] for k in [0, count): a rank's positions of an order of n
/// entries (n > 0).
void take_positions(const std::int64_t* order, std::int64_t n, std::uint64_t first, std::uint64_t stride,
                    std::int64_t count, std::int64_t* out) noexcept;

}  // namespace strider
