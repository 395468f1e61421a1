#include "sampling/block_mt19937.hpp"

// Built with -O3 (src/CMakeLists.txt): the loops below vectorize there, not at -O2. Each is built
// once per instruction set in refill_builds(); the words are the same in every build (integer
// shifts, masks and xors only).

namespace strider::sampling_detail {

namespace {

template <typename P>
inline __attribute__((always_inline)) void refill_block(typename P::Word* state, typename P::Word* output) noexcept {
  using Word = typename P::Word;
  constexpr Word kLowerMask = (Word{1} << P::kLowerBits) - 1;
  constexpr unsigned n = P::kWords, m = P::kShift;
  const auto twist = [](Word upper, Word lower, Word shifted) {
    const Word y = (upper & ~kLowerMask) | (lower & kLowerMask);
    // The matrix by a mask of y's low bit, not a branch on it: that bit is random, so a branch
    // mispredicts every other word and costs more than the rest of the draw.
    return shifted ^ (y >> 1) ^ ((Word{0} - (y & 1u)) & P::kMatrix);
  };
  unsigned i = 0;
  for (; i < n - m; ++i) state[i] = twist(state[i], state[i + 1], state[i + m]);
  for (; i < n - 1; ++i) state[i] = twist(state[i], state[i + 1], state[i + m - n]);
  state[n - 1] = twist(state[n - 1], state[0], state[m - 1]);
  for (unsigned k = 0; k < n; ++k) {
    Word y = state[k];
    y ^= (y >> P::kU) & P::kD;
    y ^= (y << P::kS) & P::kB;
    y ^= (y << P::kT) & P::kC;
    y ^= y >> P::kL;
    output[k] = y;
  }
}

void refill32_baseline(std::uint32_t* state, std::uint32_t* output) noexcept {
  refill_block<Mt19937Parameters>(state, output);
}
void refill64_baseline(std::uint64_t* state, std::uint64_t* output) noexcept {
  refill_block<Mt19937_64Parameters>(state, output);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRIDER_REFILL_X86 1
__attribute__((target("avx2"))) void refill32_avx2(std::uint32_t* state, std::uint32_t* output) noexcept {
  refill_block<Mt19937Parameters>(state, output);
}
__attribute__((target("avx2"))) void refill64_avx2(std::uint64_t* state, std::uint64_t* output) noexcept {
  refill_block<Mt19937_64Parameters>(state, output);
}
__attribute__((target("avx512f"))) void refill32_avx512f(std::uint32_t* state, std::uint32_t* output) noexcept {
  refill_block<Mt19937Parameters>(state, output);
}
__attribute__((target("avx512f"))) void refill64_avx512f(std::uint64_t* state, std::uint64_t* output) noexcept {
  refill_block<Mt19937_64Parameters>(state, output);
}
#endif

std::vector<RefillBuild> builds_here() {
  std::vector<RefillBuild> builds;
#ifdef STRIDER_REFILL_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) builds.push_back({"avx512f", refill32_avx512f, refill64_avx512f});
  if (__builtin_cpu_supports("avx2")) builds.push_back({"avx2", refill32_avx2, refill64_avx2});
#endif
  builds.push_back({"baseline", refill32_baseline, refill64_baseline});
  return builds;
}

}  // namespace

const std::vector<RefillBuild>& refill_builds() {
  static const std::vector<RefillBuild> builds = builds_here();
  return builds;
}

}  // namespace strider::sampling_detail
