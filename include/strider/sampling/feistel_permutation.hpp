#pragma once
/// \file
/// A keyed pseudo-random permutation of [0, n) for any n < 2^63: O(1) memory, O(1) time per index.

#include <array>
#include <cstddef>
#include <cstdint>

namespace strider {

/// A keyed bijection on [0, n): a Feistel network over the smallest power-of-two domain 2^k >= n
/// (k >= 2, halves of floor(k/2) and ceil(k/2) bits), with cycle walking to stay inside [0, n).
/// Because 2^k < 2n, a position needs fewer than 2 network evaluations on average.
///
/// Not a cryptographic cipher: the round function is a cheap multiply-xorshift mix, enough for
/// shuffling (every position is equally likely for an index over random keys), not for secrecy.
/// For small n the permutations it can produce are a small subset of all n! orders.
/// Immutable after construction; operator() is thread-safe.
class FeistelPermutation {
 public:
  /// Rounds of the network (each updates one half).
  static constexpr int rounds = 6;

  /// The identity on the empty set.
  FeistelPermutation() = default;
  /// A permutation of [0, size) chosen by `key` (use derive_seed for independent keys).
  /// Precondition: size < 2^63.
  FeistelPermutation(std::uint64_t size, std::uint64_t key) noexcept;

  std::uint64_t size() const noexcept { return size_; }

  /// The image of `position` (< size()). `tweak` selects one of 2^64 independent permutations
  /// of the same size under the same key, at no extra cost (used for per-window shuffles).
  std::uint64_t operator()(std::uint64_t position, std::uint64_t tweak = 0) const noexcept {
    if (size_ <= 1) return position;
    const std::uint64_t tweak_mix = tweak == 0 ? 0 : tweak_key(tweak);
    std::uint64_t value = position;
    do value = encrypt(value, tweak_mix);
    while (value >= size_);  // cycle walking: the orbit returns into [0, size)
    return value;
  }

  /// Replaces each of values[0..count) (each in [0, size())) by its image, in place. The same
  /// results as operator(), several times faster: independent positions run through the network
  /// side by side and cycle walking repeats only for those that left [0, size()), without branches
  /// that mispredict.
  void permute(std::int64_t* values, std::size_t count, std::uint64_t tweak = 0) const noexcept;

 private:
  static std::uint64_t tweak_key(std::uint64_t tweak) noexcept;

  // One round's mix of a half (<= 32 bits) with a round key; the caller keeps the high bits.
  static std::uint64_t round_mix(std::uint64_t half, std::uint64_t key) noexcept {
    std::uint64_t mixed = (half ^ key) * 0xbf58476d1ce4e5b9ULL;
    mixed ^= mixed >> 29;
    return mixed * 0x94d049bb133111ebULL;
  }

  // The network on the 2^k domain: alternately xor a mix of one half into the other.
  std::uint64_t encrypt(std::uint64_t value, std::uint64_t tweak_mix) const noexcept {
    std::uint64_t high = value >> low_bits_, low = value & low_mask_;
    for (int round = 0; round < rounds; round += 2) {
      high ^= round_mix(low, keys_[round] ^ tweak_mix) >> high_shift_;
      low ^= round_mix(high, keys_[round + 1] ^ tweak_mix) >> low_shift_;
    }
    return (high << low_bits_) | low;
  }

  std::uint64_t size_ = 0;
  int low_bits_ = 1;     // ceil(k/2)
  int high_shift_ = 63;  // 64 - floor(k/2): keeps floor(k/2) bits of a mix
  int low_shift_ = 63;   // 64 - ceil(k/2)
  std::uint64_t low_mask_ = 1;
  std::array<std::uint64_t, rounds> keys_{};
};

}  // namespace strider
