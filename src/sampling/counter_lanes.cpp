#include "sampling/counter_lanes.hpp"

#include "sampling/class_plan.hpp"

// Built with -O3 (src/CMakeLists.txt): the loops below vectorize there. With AVX-512 (DQ: 64-bit
// multiplies; VL: its compares and masks on 256-bit vectors) eight lanes' words are mixed at once;
// AVX2 multiplies 64-bit words in pieces, and the baseline build stays scalar but (with GCC)
// without branches. A group of 32 lanes, streams and both draws: about 3.6, 7.3 and 8.8 ns a lane
// on a Xeon with AVX-512. Integer arithmetic only: every build gives the same words.

namespace strider::sampling_detail {

namespace {

using detail::CounterStream;

inline __attribute__((always_inline)) void stream_lanes(std::uint64_t key, const std::int64_t* __restrict counters,
                                                        std::uint64_t* __restrict states, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) states[k] = CounterStream::state_of(key, static_cast<std::uint64_t>(counters[k]));
}

template <int Words>
inline __attribute__((always_inline)) void below_lanes(const std::uint64_t* __restrict states,
                                                       std::uint64_t* __restrict drawn,
                                                       const std::uint64_t* __restrict bounds,
                                                       const std::uint64_t* __restrict masks,
                                                       std::uint64_t* __restrict values, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t state = states[k], bound = bounds[k], mask = masks[k], before = drawn[k];
    // The last word first, then each earlier one taken over it where it is below the bound.
    std::uint64_t value = CounterStream::word_of(state, before + Words) & mask;
    std::uint64_t taken = Words;
    for (int i = Words - 1; i >= 1; --i) {
      const auto at = static_cast<std::uint64_t>(i);
      const std::uint64_t word = CounterStream::word_of(state, before + at) & mask;
      const std::uint64_t take = std::uint64_t{0} - static_cast<std::uint64_t>(word < bound);
      value ^= (word ^ value) & take;
      taken ^= (at ^ taken) & take;
    }
    const std::uint64_t draws = std::uint64_t{0} - static_cast<std::uint64_t>(bound > 1);
    values[k] = value & draws;
    drawn[k] = before + (taken & draws);
  }
}

void streams_baseline(std::uint64_t key, const std::int64_t* counters, std::uint64_t* states, std::size_t n) noexcept {
  stream_lanes(key, counters, states, n);
}
void below2_baseline(const std::uint64_t* states, std::uint64_t* drawn, const std::uint64_t* bounds,
                     const std::uint64_t* masks, std::uint64_t* values, std::size_t n) noexcept {
  below_lanes<2>(states, drawn, bounds, masks, values, n);
}
void below3_baseline(const std::uint64_t* states, std::uint64_t* drawn, const std::uint64_t* bounds,
                     const std::uint64_t* masks, std::uint64_t* values, std::size_t n) noexcept {
  below_lanes<3>(states, drawn, bounds, masks, values, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRIDER_LANES_X86 1
#define STRIDER_LANES_BUILD(name, isa)                                                                     \
  __attribute__((target(isa))) void streams_##name(std::uint64_t key, const std::int64_t* counters,        \
                                                   std::uint64_t* states, std::size_t n) noexcept {        \
    stream_lanes(key, counters, states, n);                                                                \
  }                                                                                                        \
  __attribute__((target(isa))) void below2_##name(const std::uint64_t* states, std::uint64_t* drawn,       \
                                                  const std::uint64_t* bounds, const std::uint64_t* masks, \
                                                  std::uint64_t* values, std::size_t n) noexcept {         \
    below_lanes<2>(states, drawn, bounds, masks, values, n);                                               \
  }                                                                                                        \
  __attribute__((target(isa))) void below3_##name(const std::uint64_t* states, std::uint64_t* drawn,       \
                                                  const std::uint64_t* bounds, const std::uint64_t* masks, \
                                                  std::uint64_t* values, std::size_t n) noexcept {         \
    below_lanes<3>(states, drawn, bounds, masks, values, n);                                               \
  }
STRIDER_LANES_BUILD(avx2, "avx2")
STRIDER_LANES_BUILD(avx512, "avx512f,avx512dq,avx512vl")
#undef STRIDER_LANES_BUILD
#endif

std::vector<CounterLaneBuild> builds_here() {
  std::vector<CounterLaneBuild> builds;
#ifdef STRIDER_LANES_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    builds.push_back({"avx512", streams_avx512, below2_avx512, below3_avx512});
  if (__builtin_cpu_supports("avx2")) builds.push_back({"avx2", streams_avx2, below2_avx2, below3_avx2});
#endif
  builds.push_back({"baseline", streams_baseline, below2_baseline, below3_baseline});
  return builds;
}

}  // namespace

const std::vector<CounterLaneBuild>& counter_lane_builds() {
  static const std::vector<CounterLaneBuild> builds = builds_here();
  return builds;
}

}  // namespace strider::sampling_detail
