#pragma once
/// \file
/// The native element types strider reads (samples or tokens), their sizes and names. Pure: no MPI,
/// no HDF5, so that every layer (sampling, device) can name a type.

#include <cstddef>

namespace strider {

/// Native element types strider reads (samples or tokens). float16 is IEEE 754 binary16: C++17 has
/// no such type, so its values are converted by strider/device/element_conversion.hpp.
enum class ElementType { int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64, float16 };

/// Bytes of one element.
std::size_t element_bytes(ElementType type) noexcept;
/// "float32", "uint8", ...
const char* element_name(ElementType type) noexcept;
/// True for the integer types (signed or not), false for float16, float32 and float64.
bool element_is_integer(ElementType type) noexcept;

}  // namespace strider
