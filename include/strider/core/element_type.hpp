#pragma once
/// \file
/// The native element types strider reads (samples or tokens), their sizes and names. Pure: no MPI,
/// no HDF5, so that every layer (sampling, device) can name a type.

#include <cstddef>

namespace strider {

/// Native element types strider reads (samples or tokens).
enum class ElementType { int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64 };

/// Bytes of one element.
std::size_t element_bytes(ElementType type) noexcept;
/// "float32", "uint8", ...
const char* element_name(ElementType type) noexcept;

}  // namespace strider
