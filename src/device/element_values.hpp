#pragma once
// Reading token ids of any integer ElementType (internal to src/device: the CPU models and the CUDA
// kernels). Samples become float values through ElementConversion (strider/device/element_conversion.hpp).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "strider/core/element_type.hpp"
#include "strider/core/error.hpp"

namespace strider::detail {

/// Calls body(T{}) with the C++ type of `type`. float16 has no standard C++ type: body(Float16{})
/// with the type the caller names for it (its stored bits, or CUDA's __half), or UsageError when
/// the caller names none (Float16 = void).
template <typename Float16 = void, typename Body>
decltype(auto) with_element_type(ElementType type, Body&& body) {
  switch (type) {
    case ElementType::int8:
      return body(std::int8_t{});
    case ElementType::uint8:
      return body(std::uint8_t{});
    case ElementType::int16:
      return body(std::int16_t{});
    case ElementType::uint16:
      return body(std::uint16_t{});
    case ElementType::int32:
      return body(std::int32_t{});
    case ElementType::uint32:
      return body(std::uint32_t{});
    case ElementType::int64:
      return body(std::int64_t{});
    case ElementType::uint64:
      return body(std::uint64_t{});
    case ElementType::float32:
      return body(float{});
    case ElementType::float64:
      return body(double{});
    case ElementType::float16:
      if constexpr (!std::is_void_v<Float16>) {
        return body(Float16{});
      } else {
        STRIDER_THROW(UsageError, "float16 values have no C++ type here: convert them with ElementConversion");
      }
  }
  STRIDER_THROW(UsageError, "unknown element type " + std::to_string(static_cast<int>(type)));
}

/// Element `index` of an array of T at `base` (any alignment).
template <typename T>
T load_element(const std::byte* base, std::int64_t index) noexcept {
  T value;
  std::memcpy(&value, base + index * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return value;
}

/// Integer token id value mapped into 0..vocab-1 (the hashing trick: id mod vocab, non-negative).
template <typename T>
std::int64_t token_bucket(T value, std::int64_t vocab) noexcept {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::is_signed_v<T>) {
    std::int64_t bucket = static_cast<std::int64_t>(value) % vocab;
    return bucket < 0 ? bucket + vocab : bucket;
  } else {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(value) % static_cast<std::uint64_t>(vocab));
  }
}

}  // namespace strider::detail
