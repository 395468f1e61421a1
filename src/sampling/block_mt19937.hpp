#pragma once
// MT19937 and MT19937-64: the streams of std::mt19937 and std::mt19937_64, faster.

#include <cstdint>
#include <vector>

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

/// One block of a twister's state advanced and tempered: state[0, kWords) replaced by the next
/// state, output[0, kWords) by its tempered words (block_mt19937.cpp).
using RefillBlock32 = void (*)(std::uint32_t* state, std::uint32_t* output) noexcept;
using RefillBlock64 = void (*)(std::uint64_t* state, std::uint64_t* output) noexcept;

/// A build of the block refill for one instruction set.
struct RefillBuild {
  const char* name;  // "avx512f", "avx2" or "baseline"
  RefillBlock32 refill32;
  RefillBlock64 refill64;
};

/// The builds this CPU can run, fastest first (the baseline build always, last). The engines use
/// the first; the tests check every one against the standard engines.
const std::vector<RefillBuild>& refill_builds();

/// A Mersenne Twister with the stream of the standard engine of the same parameters (tested against
/// it), generated and tempered a whole state at a time, in loops the compiler vectorizes for the
/// widest instruction set the CPU offers (refill_builds): several times faster than libstdc++'s
/// word-at-a-time engine. torch_randperm and the plans' shuffles spend most of their time drawing.
template <typename P>
class BlockMersenneTwister {
 public:
  using Word = typename P::Word;
  using Refill = void (*)(Word* state, Word* output) noexcept;
  /// With `refill` null, the fastest build this CPU runs.
  explicit BlockMersenneTwister(Word seed, Refill refill = nullptr) noexcept
      : refill_(refill != nullptr ? refill : fastest()) {
    state_[0] = seed;
    for (unsigned i = 1; i < P::kWords; ++i)
      state_[i] = P::kInit * (state_[i - 1] ^ (state_[i - 1] >> P::kInitShift)) + static_cast<Word>(i);
  }
  Word operator()() noexcept {
    if (next_ == P::kWords) {
      refill_(state_, output_);
      next_ = 0;
    }
    return output_[next_++];
  }

  /// The engine's draws with its place in the block held in the drawer, a local of the loop that
  /// draws, and handed back when the drawer ends. As the engine's member, the place is read back
  /// after every store the loop makes through a pointer the compiler cannot tell from it: the
  /// plans' Fisher-Yates over 32-bit words would wait on it after each swap.
  class Drawer {
   public:
    explicit Drawer(BlockMersenneTwister& engine) noexcept : engine_(engine), next_(engine.next_) {}
    Drawer(const Drawer&) = delete;
    Drawer& operator=(const Drawer&) = delete;
    ~Drawer() { engine_.next_ = next_; }
    Word operator()() noexcept {
      if (next_ == P::kWords) {
        engine_.refill_(engine_.state_, engine_.output_);
        next_ = 0;
      }
      return engine_.output_[next_++];
    }

   private:
    BlockMersenneTwister& engine_;
    unsigned next_;
  };

 private:
  static Refill fastest() noexcept {
    const RefillBuild& build = refill_builds().front();
    if constexpr (sizeof(Word) == 4) {
      return build.refill32;
    } else {
      return build.refill64;
    }
  }
  Refill refill_;
  Word state_[P::kWords];
  Word output_[P::kWords];
  unsigned next_ = P::kWords;
};

/// The stream of std::mt19937 (torch's CPU generator).
using BlockMt19937 = BlockMersenneTwister<Mt19937Parameters>;
/// The stream of std::mt19937_64 (the plans' shuffles).
using BlockMt19937_64 = BlockMersenneTwister<Mt19937_64Parameters>;

}  // namespace strider::sampling_detail
