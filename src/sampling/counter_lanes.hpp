#pragma once
// Counter streams (detail::CounterStream) of many positions at a time, for the weighted sampler's
// draws: each lane's stream, and the first of its next few words below a bound, in loops the
// compiler vectorizes, built once per instruction set and chosen at run time as the twister's
// refill is (counter_lanes.cpp). Every build gives CounterStream's own words and places.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strider::sampling_detail {

/// For k < n: states[k] = CounterStream::state_of(key, counters[k]).
using StreamLanes = void (*)(std::uint64_t key, const std::int64_t* counters, std::uint64_t* states,
                             std::size_t n) noexcept;

/// For k < n: lane k's stream (state states[k], drawn[k] words drawn) draws below bounds[k] as
/// CounterStream::below(bounds[k], masks[k]) does, from its next 2 words only (below2) or 3
/// (below3): drawn side by side, the first below the bound is chosen with masks, not a branch, so a
/// rejection (nearly half the draws for a bound just past a power of two) mispredicts nothing.
/// For a bound above 1, values[k] < bounds[k] and drawn[k] counts the words up to the one taken;
/// where all were rejected, values[k] >= bounds[k] and drawn[k] counts them all, for
/// CounterStream::resumed to draw on. A bound of 0 or 1 gives 0 and draws no word, as below does.
using BelowLanes = void (*)(const std::uint64_t* states, std::uint64_t* drawn, const std::uint64_t* bounds,
                            const std::uint64_t* masks, std::uint64_t* values, std::size_t n) noexcept;

/// A build of the lanes for one instruction set.
struct CounterLaneBuild {
  const char* name;  // "avx512", "avx2" or "baseline"
  StreamLanes streams;
  BelowLanes below2;  // from the next 2 words
  BelowLanes below3;  // from the next 3 words
};

/// The builds this CPU can run, fastest first (the baseline build always, last). The weighted
/// sampler uses the first; the tests check every one against CounterStream.
const std::vector<CounterLaneBuild>& counter_lane_builds();

}  // namespace strider::sampling_detail
