#pragma once
// The page the pipeline lays its host memory out in (the ring's buffers, the store's node segment),
// and rounding up to it.

#include <cstddef>

namespace strider::pipeline_detail {

/// A page of host memory: Linux's on x86-64 and the smallest on Arm64.
inline constexpr std::size_t kPageBytes = 4096;

/// `value` rounded up to a multiple of `unit` (> 0).
template <typename T>
constexpr T round_up(T value, T unit) noexcept {
  return (value + unit - 1) / unit * unit;
}

}  // namespace strider::pipeline_detail
