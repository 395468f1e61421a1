// IEEE 754 binary16 <-> float32, bit by bit (see strider/core/float16.hpp).
#include "strider/core/float16.hpp"

#include <cstring>

namespace strider {

float float16_to_float32(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t result = sign;
  if (exponent == 0x1f) {
    // Infinity, or NaN with its payload and the quiet bit set.
    result |= 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  } else if (exponent != 0) {
    result |= ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {
    // Subnormal: mantissa * 2^-24, a normal float32. Shift the leading 1 into the implicit bit.
    std::uint32_t float_exponent = 127 - 14;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --float_exponent;
    }
    result |= (float_exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &result, sizeof(value));
  return value;
}

std::uint16_t float32_to_float16(float value) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet, the payload's top bits kept
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 (or infinity)
  if (magnitude <= 0x33000000u) return sign;  // <= 2^-25: zero (2^-25 is a tie, and 0 is even)
  std::uint32_t half = 0;
  std::uint32_t rest = 0;
  std::uint32_t halfway = 0;
  if (magnitude >= 0x38800000u) {
    // Normal float16 (>= 2^-14): rebias the exponent, keep the top 10 mantissa bits.
    half = (magnitude - ((127u - 15u) << 23)) >> 13;
    rest = magnitude & 0x1fffu;
    halfway = 0x1000u;
  } else {
    // Subnormal float16: units of 2^-24.
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // 14..24
    half = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  }
  // Round to nearest even; a carry out of the mantissa correctly bumps the exponent.
  if (rest > halfway || (rest == halfway && (half & 1u) != 0)) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

}  // namespace strider
