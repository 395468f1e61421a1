#pragma once
// The plans' shuffles: std::mt19937_64's Fisher-Yates (shuffle_in_place) with its stream drawn a
// block at a time (BlockMt19937_64).

#include <cstddef>
#include <cstdint>

namespace strider::sampling_detail {

/// shuffle_in_place(values, engine) with engine = std::mt19937_64(seed), on values[0, n): the same
/// swaps (Fisher-Yates does not look at the values, so any words shuffle alike), the engine's
/// stream drawn a block at a time.
void shuffle_seeded(std::int64_t* values, std::size_t n, std::uint64_t seed);
void shuffle_seeded(std::uint64_t* values, std::size_t n, std::uint64_t seed);
void shuffle_seeded(std::uint32_t* values, std::size_t n, std::uint64_t seed);

}  // namespace strider::sampling_detail
