#pragma once
// MT19937 for torch_randperm: the stream of std::mt19937, faster.

#include <cstdint>

namespace strider::sampling_detail {

/// MT19937: the stream of std::mt19937 (tested against it), generated and tempered 624 words at a
/// time in plain loops the compiler keeps branch-free, several times faster than libstdc++'s
/// word-at-a-time engine. torch_randperm spends most of its time drawing.
class BlockMt19937 {
 public:
  explicit BlockMt19937(std::uint32_t seed) noexcept {
    state_[0] = seed;
    for (std::uint32_t i = 1; i < kWords; ++i) state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
  }
  std::uint32_t operator()() noexcept {
    if (next_ == kWords) refill();
    return output_[next_++];
  }

 private:
  static constexpr std::uint32_t kWords = 624, kShift = 397;
  static std::uint32_t twist(std::uint32_t upper, std::uint32_t lower, std::uint32_t shifted) noexcept {
    const std::uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return shifted ^ (y >> 1) ^ ((y & 1u) != 0 ? 0x9908b0dfu : 0u);
  }
  void refill() noexcept {
    std::uint32_t i = 0;
    for (; i < kWords - kShift; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + kShift]);
    for (; i < kWords - 1; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + kShift - kWords]);
    state_[kWords - 1] = twist(state_[kWords - 1], state_[0], state_[kShift - 1]);
    for (std::uint32_t k = 0; k < kWords; ++k) {
      std::uint32_t y = state_[k];
      y ^= y >> 11;
      y ^= (y << 7) & 0x9d2c5680u;
      y ^= (y << 15) & 0xefc60000u;
      y ^= y >> 18;
      output_[k] = y;
    }
    next_ = 0;
  }
  std::uint32_t state_[kWords];
  std::uint32_t output_[kWords];
  std::uint32_t next_ = kWords;
};

}  // namespace strider::sampling_detail
