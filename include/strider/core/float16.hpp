#pragma once
/// \file
/// IEEE 754 binary16 (float16) values and float32, converted bit by bit: C++17 has no half type, so
/// strider keeps float16 samples as their stored 16 bits. Pure and thread-safe; the element
/// conversion (strider/device/element_conversion.hpp) converts whole batches with these.

#include <cstdint>

namespace strider {

/// The float32 value of an IEEE 754 binary16 (exact: every float16 is a float32; a NaN stays NaN).
float float16_to_float32(std::uint16_t bits) noexcept;

/// The binary16 nearest to `value` (ties to even; beyond 65504 by half an ulp or more: infinity;
/// subnormals kept; NaN stays NaN).
std::uint16_t float32_to_float16(float value) noexcept;

}  // namespace strider
