// ChunkInflater with libdeflate (STRIDER_HAVE_LIBDEFLATE) or zlib, and HDF5's shuffle undone.
#include "io/chunk_inflate.hpp"

#include <cstring>
#include <new>

#if STRIDER_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

namespace strider::io_detail {

#if STRIDER_HAVE_LIBDEFLATE
ChunkInflater::ChunkInflater() : decompressor_(libdeflate_alloc_decompressor()) {
  if (decompressor_ == nullptr) throw std::bad_alloc();
}
ChunkInflater::~ChunkInflater() {
  libdeflate_free_decompressor(static_cast<libdeflate_decompressor*>(decompressor_));
}

bool ChunkInflater::inflate(const std::byte* in, std::size_t in_bytes, std::byte* out, std::size_t out_bytes) {
  std::size_t inflated = 0;
  const libdeflate_result result = libdeflate_zlib_decompress(static_cast<libdeflate_decompressor*>(decompressor_), in,
                                                              in_bytes, out, out_bytes, &inflated);
  return result == LIBDEFLATE_SUCCESS && inflated == out_bytes;
}
const char* ChunkInflater::library() noexcept {
  return "libdeflate";
}
#else
ChunkInflater::ChunkInflater() = default;
ChunkInflater::~ChunkInflater() = default;

bool ChunkInflater::inflate(const std::byte* in, std::size_t in_bytes, std::byte* out, std::size_t out_bytes) {
  // uncompress() with no room reports success without saying how much it found: give it a byte.
  Bytef spare = 0;
  Bytef* const target = out_bytes > 0 ? reinterpret_cast<Bytef*>(out) : &spare;
  uLongf inflated = out_bytes > 0 ? static_cast<uLongf>(out_bytes) : 1;
  const int result = ::uncompress(target, &inflated, reinterpret_cast<const Bytef*>(in), static_cast<uLong>(in_bytes));
  return result == Z_OK && inflated == out_bytes;
}
const char* ChunkInflater::library() noexcept {
  return "zlib";
}
#endif

namespace {

/// Element-major: writes `out` in order, reading byte k of each element from plane k. `kSize` > 0:
/// the element size as a constant (the common sizes, unrolled); 0: `size` at run time.
template <std::size_t kSize>
void unshuffle_elements(const std::byte* in, std::size_t elements, std::size_t size, std::byte* out) noexcept {
  const std::size_t bytes = kSize > 0 ? kSize : size;
  for (std::size_t element = 0; element < elements; ++element)
    for (std::size_t byte = 0; byte < bytes; ++byte) out[element * bytes + byte] = in[byte * elements + element];
}

}  // namespace

void unshuffle(const std::byte* in, std::size_t bytes, std::size_t element_bytes, std::byte* out) noexcept {
  const std::size_t elements = element_bytes > 1 ? bytes / element_bytes : 0;
  switch (elements > 0 ? element_bytes : 0) {
    case 2:
      unshuffle_elements<2>(in, elements, 2, out);
      break;
    case 4:
      unshuffle_elements<4>(in, elements, 4, out);
      break;
    case 8:
      unshuffle_elements<8>(in, elements, 8, out);
      break;
    case 0:
      break;
    default:
      unshuffle_elements<0>(in, elements, element_bytes, out);
  }
  const std::size_t whole = elements * element_bytes;  // 0 for single-byte elements: all of it copied
  if (bytes > whole) std::memcpy(out + whole, in + whole, bytes - whole);
}

}  // namespace strider::io_detail
