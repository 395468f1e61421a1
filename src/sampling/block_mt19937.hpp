#pragma once
// MT19937 and MT19937-64: the streams of std::mt19937 and std::mt19937_64, faster.

#include <cstdint>

namespace strider::sampling_detail {

/// The parameters of std::mt19937 (32-bit words) and std::mt19937_64 (64-bit words).
struct Mt19937Parameters {
  using Word = std::uint32_t;
  static constexpr unsigned kWords = 624, kShift = 397, kLowerBits = 31;
  static constexpr Word kMatrix = 0x9908b0dfu;
  static constexpr unsigned kU = 11, kS = 7, kT = 15, kL = 18, kInitShift = 30;
  static constexpr Word kD = 0xffffffffu, kB = 0x9d2c5680u, kC = 0xefc60000u, kInit = 1812433253u;
};
struct Mt19937_64Parameters {
  using Word = std::uint64_t;
  static constexpr unsigned kWords = 312, kShift = 156, kLowerBits = 31;
  static constexpr Word kMatrix = 0xb5026f5aa96619e9ULL;
  static constexpr unsigned kU = 29, kS = 17, kT = 37, kL = 43, kInitShift = 62;
  static constexpr Word kD = 0x5555555555555555ULL, kB = 0x71d67fffeda60000ULL, kC = 0xfff7eee000000000ULL,
                        kInit = 6364136223846793005ULL;
};

/// A Mersenne Twister with the stream of the standard engine of the same parameters (tested against
/// it), generated and tempered a whole state at a time in plain loops the compiler keeps
/// branch-free: several times faster than libstdc++'s word-at-a-time engine. torch_randperm and
/// the bucketed plan spend most of their time drawing.
template <typename P>
class BlockMersenneTwister {
 public:
  using Word = typename P::Word;
  explicit BlockMersenneTwister(Word seed) noexcept {
    state_[0] = seed;
    for (unsigned i = 1; i < P::kWords; ++i)
      state_[i] = P::kInit * (state_[i - 1] ^ (state_[i - 1] >> P::kInitShift)) + static_cast<Word>(i);
  }
  Word operator()() noexcept {
    if (next_ == P::kWords) refill();
    return output_[next_++];
  }

 private:
  static constexpr Word kLowerMask = (Word{1} << P::kLowerBits) - 1;
  static Word twist(Word upper, Word lower, Word shifted) noexcept {
    const Word y = (upper & ~kLowerMask) | (lower & kLowerMask);
    // The matrix by a mask of y's low bit, not a branch on it: that bit is random, so a branch
    // (which the compiler keeps for 64-bit words) mispredicts every other word and costs more than
    // the rest of the draw.
    return shifted ^ (y >> 1) ^ ((Word{0} - (y & 1u)) & P::kMatrix);
  }
  void refill() noexcept {
    constexpr unsigned n = P::kWords, m = P::kShift;
    unsigned i = 0;
    for (; i < n - m; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + m]);
    for (; i < n - 1; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + m - n]);
    state_[n - 1] = twist(state_[n - 1], state_[0], state_[m - 1]);
    for (unsigned k = 0; k < n; ++k) {
      Word y = state_[k];
      y ^= (y >> P::kU) & P::kD;
      y ^= (y << P::kS) & P::kB;
      y ^= (y << P::kT) & P::kC;
      y ^= y >> P::kL;
      output_[k] = y;
    }
    next_ = 0;
  }
  Word state_[P::kWords];
  Word output_[P::kWords];
  unsigned next_ = P::kWords;
};

/// The stream of std::mt19937 (torch's CPU generator).
using BlockMt19937 = BlockMersenneTwister<Mt19937Parameters>;
/// The stream of std::mt19937_64 (the plans' shuffles).
using BlockMt19937_64 = BlockMersenneTwister<Mt19937_64Parameters>;

}  // namespace strider::sampling_detail
