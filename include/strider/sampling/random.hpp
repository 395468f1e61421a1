#pragma once
/// \file
/// Random streams used by the samplers. Pure functions of their seeds: the same numbers on every
/// rank, thread and machine. mix64 and derive_seed come from strider/core/hash.hpp.

#include <cstdint>
#include <random>
#include <vector>

#include "strider/core/hash.hpp"

namespace strider {

/// seed + epoch modulo 2^64, as torch computes it (Python ints, then read as uint64).
constexpr std::uint64_t epoch_seed(std::int64_t seed, std::int64_t epoch) noexcept {
  return static_cast<std::uint64_t>(seed) + static_cast<std::uint64_t>(epoch);
}

/// torch.randperm(n, generator seeded with `seed`) on the CPU, exactly as PyTorch 1.13 computes it
/// for n < 214,748,364: std::mt19937 from the low 32 bits of the seed, then for i in 0..n-2
/// z = draw32 % (n-i), swap(r[i], r[i+z]). Above that n the same Fisher-Yates loop runs (newer
/// torch switches algorithm there); where n-i exceeds 2^32 the draw takes 64 bits (two draws).
/// O(n) time and memory.
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);
/// The same permutation into `order` (resized to n), reusing its memory: a sampler that plans an
/// epoch after another keeps its pages (a new 8 MB order for N = 1M costs as much in page faults as
/// the shuffle itself).
void torch_randperm(std::int64_t n, std::uint64_t seed, std::vector<std::int64_t>& order);
/// The same permutation into order[0, n) (memory the caller holds: the node's shared order).
void torch_randperm(std::int64_t n, std::uint64_t seed, std::int64_t* order);

/// An unbiased integer in [0, bound) from a 64-bit engine (Lemire's method with rejection).
std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound);

/// Fisher-Yates shuffle of values with a 64-bit engine (portable, unlike std::shuffle whose
/// algorithm is implementation-defined).
void shuffle_in_place(std::vector<std::int64_t>& values, std::mt19937_64& engine);

}  // namespace strider
