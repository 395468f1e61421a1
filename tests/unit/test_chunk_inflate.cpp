// ChunkInflater and unshuffle (src/io/chunk_inflate.hpp) against zlib's own compress2, the stream
// HDF5's deflate filter writes, and against HDF5's shuffle layout written out by the test. Built
// twice: in the unit binary with the library's inflater (libdeflate where found) and in
// strider_inflate_zlib_tests with the zlib one, so both are run wherever the tests run.
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/chunk_inflate.hpp"

using strider::io_detail::ChunkInflater;
using strider::io_detail::unshuffle;

namespace {

/// Bytes that compress (float32 rows with a pattern) but not to nothing.
std::vector<std::byte> chunk_bytes(std::size_t count) {
  std::vector<std::byte> bytes(count);
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    bytes[i] = static_cast<std::byte>(i % 7 == 0 ? state >> 24 : i % 251);
  }
  return bytes;
}

std::vector<std::byte> deflate(const std::vector<std::byte>& plain, int level) {
  uLongf size = compressBound(static_cast<uLong>(plain.size()));
  std::vector<std::byte> stream(size);
  REQUIRE(compress2(reinterpret_cast<Bytef*>(stream.data()), &size, reinterpret_cast<const Bytef*>(plain.data()),
                    static_cast<uLong>(plain.size()), level) == Z_OK);
  stream.resize(size);
  return stream;
}

}  // namespace

TEST_CASE("ChunkInflater inflates zlib streams to their exact size and refuses anything else", "[inflate]") {
  REQUIRE(std::string(ChunkInflater::library()) == STRIDER_TEST_EXPECTED_INFLATER);
  ChunkInflater inflater;
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{384}, std::size_t{262144}}) {
    for (const int level : {0, 1, 4, 9}) {
      CAPTURE(size, level);
      const std::vector<std::byte> plain = chunk_bytes(size);
      const std::vector<std::byte> stream = deflate(plain, level);
      std::vector<std::byte> out(size + 16, std::byte{0x7e});
      REQUIRE(inflater.inflate(stream.data(), stream.size(), out.data(), size));
      REQUIRE(std::equal(plain.begin(), plain.end(), out.begin()));
      REQUIRE(out[size] == std::byte{0x7e});  // nothing written past the chunk
      // Another size than the stream holds, either way, is refused.
      REQUIRE_FALSE(inflater.inflate(stream.data(), stream.size(), out.data(), size + 1));
      if (size > 0) REQUIRE_FALSE(inflater.inflate(stream.data(), stream.size(), out.data(), size - 1));
      // A cut stream, and one with bytes changed in its middle (the checksum or the code catches it).
      REQUIRE_FALSE(inflater.inflate(stream.data(), stream.size() - 1, out.data(), size));
      std::vector<std::byte> damaged = stream;
      for (std::size_t i = damaged.size() / 2; i < damaged.size() / 2 + 2; ++i) damaged[i] ^= std::byte{0x5a};
      REQUIRE_FALSE(inflater.inflate(damaged.data(), damaged.size(), out.data(), size));
    }
  }
}

TEST_CASE("unshuffle undoes HDF5's shuffle for every element size, tail included", "[inflate]") {
  for (const std::size_t element :
       {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{8}, std::size_t{12}}) {
    for (const std::size_t bytes : {std::size_t{0}, element * 5, element * 37 + element / 2, std::size_t{1000}}) {
      CAPTURE(element, bytes);
      const std::vector<std::byte> plain = chunk_bytes(bytes);
      // HDF5's shuffle (H5Zshuffle.c): byte k of every whole element, k = 0..size-1, then the tail.
      const std::size_t elements = bytes / element;
      std::vector<std::byte> shuffled;
      for (std::size_t k = 0; k < element; ++k)
        for (std::size_t e = 0; e < elements; ++e) shuffled.push_back(plain[e * element + k]);
      shuffled.insert(shuffled.end(), plain.begin() + static_cast<std::ptrdiff_t>(elements * element), plain.end());
      REQUIRE(shuffled.size() == bytes);
      std::vector<std::byte> out(bytes, std::byte{0});
      unshuffle(shuffled.data(), bytes, element, out.data());
      REQUIRE(out == plain);
    }
  }
}
