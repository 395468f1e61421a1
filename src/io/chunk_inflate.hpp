#pragma once
// Chunks of a deflate-compressed dataset inflated by strider rather than by HDF5's filter pipeline:
// the hdf5 engine reads such chunks raw (H5Dread_chunk) and inflates them straight into the batch
// (or the store's segment), with libdeflate where the build found it (about 1.7x zlib's speed on
// float32 features) and zlib otherwise. HDF5's deflate filter writes zlib streams (compress2); its
// shuffle filter stores byte k of every element together, k = 0..size-1.
#include <cstddef>

namespace strider::io_detail {

/// A decompressor of zlib streams; one per reader (not thread-safe).
class ChunkInflater {
 public:
  ChunkInflater();
  ~ChunkInflater();
  ChunkInflater(const ChunkInflater&) = delete;
  ChunkInflater& operator=(const ChunkInflater&) = delete;

  /// Inflates the zlib stream in[0..in_bytes) into out, which it must fill exactly (out_bytes);
  /// false when it is not a valid stream or inflates to another size.
  bool inflate(const std::byte* in, std::size_t in_bytes, std::byte* out, std::size_t out_bytes);
  /// "libdeflate" or "zlib": what this build inflates with.
  static const char* library() noexcept;

 private:
  void* decompressor_ = nullptr;  // libdeflate's, when built with it
};

/// Undoes HDF5's shuffle filter: `bytes` bytes of elements of `element_bytes` each, shuffled in `in`,
/// in element order into `out` (in and out do not overlap). A tail shorter than an element is copied as is.
void unshuffle(const std::byte* in, std::size_t bytes, std::size_t element_bytes, std::byte* out) noexcept;

}  // namespace strider::io_detail
