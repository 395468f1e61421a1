#include "strider/sampling/feistel_permutation.hpp"

#include <algorithm>

#include "strider/sampling/random.hpp"

namespace strider {

FeistelPermutation::FeistelPermutation(std::uint64_t size, std::uint64_t key) noexcept : size_(size) {
  int bits = 2;  // at least one bit per half, so that every round mixes
  while (bits < 63 && (std::uint64_t{1} << bits) < size) ++bits;
  const int high_bits = bits / 2;
  low_bits_ = bits - high_bits;
  high_shift_ = 64 - high_bits;
  low_shift_ = 64 - low_bits_;
  low_mask_ = (std::uint64_t{1} << low_bits_) - 1;
  for (int round = 0; round < rounds; ++round) keys_[round] = mix64(key + static_cast<std::uint64_t>(round));
}

void FeistelPermutation::permute(std::int64_t* values, std::size_t count, std::uint64_t tweak) const noexcept {
  if (size_ <= 1) return;
  const std::uint64_t tweak_mix = tweak == 0 ? 0 : tweak_key(tweak);
  constexpr std::size_t chunk = 256;
  std::uint32_t pending[chunk];  // positions of the chunk still outside [0, size) after a pass
  for (std::size_t begin = 0; begin < count; begin += chunk) {
    std::int64_t* part = values + begin;
    const std::size_t part_size = std::min(chunk, count - begin);
    std::size_t pending_count = 0;
    for (std::size_t i = 0; i < part_size; ++i) {
      const std::uint64_t value = encrypt(static_cast<std::uint64_t>(part[i]), tweak_mix);
      part[i] = static_cast<std::int64_t>(value);  // < 2^63: the domain has at most 63 bits
      pending[pending_count] = static_cast<std::uint32_t>(i);
      pending_count += value >= size_ ? 1 : 0;
    }
    while (pending_count > 0) {  // cycle walking, pass by pass
      std::size_t still_out = 0;
      for (std::size_t k = 0; k < pending_count; ++k) {
        const std::uint32_t i = pending[k];
        const std::uint64_t value = encrypt(static_cast<std::uint64_t>(part[i]), tweak_mix);
        part[i] = static_cast<std::int64_t>(value);
        pending[still_out] = i;
        still_out += value >= size_ ? 1 : 0;
      }
      pending_count = still_out;
    }
  }
}

std::uint64_t FeistelPermutation::tweak_key(std::uint64_t tweak) noexcept {
  return mix64(tweak ^ 0x5bd1e9955bd1e995ULL);
}

}  // namespace strider
