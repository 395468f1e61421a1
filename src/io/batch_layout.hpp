#pragma once
// The checks every BatchReader::read() makes before it copies anything, and where each row of the
// batch goes: shared by the file engines and the in-memory store, so that all refuse alike.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "strider/core/error.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider::io_detail {

/// Checks indices[0..count) (each in [0, rows) of `path`) and that the batch fits `destination`,
/// and fills `out_offsets` (count + 1 entries): row k's bytes go to [out_offsets[k], out_offsets[k + 1])
/// of destination.samples. `row_bytes(row)` is a row's size in bytes. Returns the batch's bytes.
/// Throws UsageError naming the problem.
template <class RowBytes>
std::int64_t lay_out_batch(const std::int64_t* indices, std::int64_t count, std::int64_t rows, const std::string& path,
                           const BatchDestination& destination, RowBytes row_bytes,
                           std::vector<std::int64_t>& out_offsets) {
  if (count < 0) STRIDER_THROW(UsageError, "read: negative count " + std::to_string(count));
  if (count > 0 && indices == nullptr) STRIDER_THROW(UsageError, "read: null indices");
  // Every index checked in one pass without a branch per row (a negative one, as unsigned, is past
  // any row); the first one outside is looked for only to name it.
  const auto outside_rows = [rows](std::int64_t row) {
    return static_cast<std::uint64_t>(row) >= static_cast<std::uint64_t>(rows);
  };
  bool outside = false;
  for (std::int64_t k = 0; k < count; ++k) outside |= outside_rows(indices[k]);
  if (outside) {
    const std::int64_t k = std::find_if(indices, indices + count, outside_rows) - indices;
    STRIDER_THROW(UsageError, "read: index " + std::to_string(indices[k]) + " at batch position " + std::to_string(k) +
                                  " is outside [0, " + std::to_string(rows) + ") of " + path);
  }
  out_offsets.resize(static_cast<std::size_t>(count) + 1);
  out_offsets[0] = 0;
  for (std::int64_t k = 0; k < count; ++k) out_offsets[k + 1] = out_offsets[k] + row_bytes(indices[k]);
  const std::int64_t bytes = out_offsets[count];
  if (bytes > destination.samples_capacity_bytes || (bytes > 0 && destination.samples == nullptr))
    STRIDER_THROW(UsageError, "read: the batch of " + std::to_string(count) + " samples needs " +
                                  std::to_string(bytes) + " bytes, the destination holds " +
                                  std::to_string(destination.samples_capacity_bytes));
  return bytes;
}

}  // namespace strider::io_detail
