#pragma once
/// \file
/// Hashing: FNV-1a 64-bit over bytes (plan hashes for consensus checks, config hashes, dataset
/// fingerprints) and the SplitMix64 mix of one value (derived seeds, counter-based random streams).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace strider {

/// Incremental FNV-1a (64 bit). Values are hashed by their little-endian bytes, so hashes agree
/// across ranks and with the Python scripts that make test goldens.
class Fnv1a64 {
 public:
  static constexpr std::uint64_t offset_basis = 0xcbf29ce484222325ULL;
  static constexpr std::uint64_t prime = 0x100000001b3ULL;

  void add_bytes(const void* data, std::size_t bytes) noexcept {
    const auto* cursor = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
      state_ ^= cursor[i];
      state_ *= prime;
    }
  }
  /// Adds an integer or floating value as its 8-byte (or native-size) little-endian bytes.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  void add(T value) noexcept {
    add_bytes(&value, sizeof(T));  // x86-64 and aarch64 are little-endian
  }
  void add(const std::string& text) noexcept { add(std::string_view(text)); }
  void add(const char* text) noexcept { add(std::string_view(text)); }
  void add(std::string_view text) noexcept {
    add(static_cast<std::uint64_t>(text.size()));
    add_bytes(text.data(), text.size());
  }
  std::uint64_t value() const noexcept { return state_; }

 private:
  std::uint64_t state_ = offset_basis;
};

/// SplitMix64 finaliser: a strong 64-bit mix, for deriving independent seeds.
constexpr std::uint64_t mix64(std::uint64_t value) noexcept {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

/// A seed for one purpose (stream) of one epoch: independent streams for independent decisions
/// (a sampler's shuffle and batch order, a synthetic file's rows, a model's initial weights), all
/// derived from the run's seed.
constexpr std::uint64_t derive_seed(std::int64_t seed, std::int64_t epoch, std::uint64_t stream) noexcept {
  return mix64(mix64(static_cast<std::uint64_t>(seed) ^ mix64(static_cast<std::uint64_t>(epoch))) + stream);
}

}  // namespace strider
