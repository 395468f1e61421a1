#include "strider/core/element_type.hpp"

namespace strider {

std::size_t element_bytes(ElementType type) noexcept {
  switch (type) {
    case ElementType::int8:
    case ElementType::uint8:
      return 1;
    case ElementType::int16:
    case ElementType::uint16:
    case ElementType::float16:
      return 2;
    case ElementType::int32:
    case ElementType::uint32:
    case ElementType::float32:
      return 4;
    case ElementType::int64:
    case ElementType::uint64:
    case ElementType::float64:
      return 8;
  }
  return 0;
}

const char* element_name(ElementType type) noexcept {
  switch (type) {
    case ElementType::int8:
      return "int8";
    case ElementType::uint8:
      return "uint8";
    case ElementType::int16:
      return "int16";
    case ElementType::uint16:
      return "uint16";
    case ElementType::int32:
      return "int32";
    case ElementType::uint32:
      return "uint32";
    case ElementType::int64:
      return "int64";
    case ElementType::uint64:
      return "uint64";
    case ElementType::float32:
      return "float32";
    case ElementType::float64:
      return "float64";
    case ElementType::float16:
      return "float16";
  }
  return "?";
}

bool element_is_integer(ElementType type) noexcept {
  return type != ElementType::float16 && type != ElementType::float32 && type != ElementType::float64;
}

}  // namespace strider
