#pragma once
/// \file
/// Synthetic per-sample lengths for planning and benchmarks (bucketed mode without a dataset).

#include <cstdint>
#include <string>
#include <vector>

namespace strider {

/// `count` lengths drawn from a distribution spelled as text, a pure function of (spec, count, seed)
/// on a platform (log-normal goes through libm's exp/log/cos):
///   "lognormal:median=128,min=8,max=2048[,sigma=1]"  log-normal, rounded and clamped to [min, max]
///   "uniform:min=8,max=2048"                         uniform integers in [min, max]
/// Throws UsageError for an unknown distribution, a missing or bad parameter, or min > max.
/// Pure; O(count).
std::vector<std::int64_t> synthetic_lengths(const std::string& spec, std::int64_t count, std::int64_t seed);

}  // namespace strider
