#pragma once
/// \file
/// Per-feature or per-channel statistics of fixed-size samples (count, mean, standard deviation,
/// min, max) over the rows of a dataset, computed in parallel: each rank reads a contiguous share,
/// and the partial statistics are merged with Chan et al.'s pairwise update (no sum of squares,
/// so no cancellation), per block on a rank and then across ranks in rank order. The result
/// depends on the rank count only through rounding. `strider-inspect stats` prints them and
/// `strider-train --normalize auto` normalizes its inputs with them.

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/device/element_conversion.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

/// Statistics of each feature, or of each channel (every element of the channel, over all rows).
struct InputStatistics {
  StatisticsLayout layout = StatisticsLayout::per_feature;
  std::vector<std::int64_t> sample_shape;  ///< one sample's shape
  std::int64_t rows = 0;                   ///< rows the statistics cover
  std::vector<std::int64_t> count;         ///< values per feature or channel
  std::vector<double> mean;
  std::vector<double> stddev;  ///< population standard deviation
  std::vector<double> min;
  std::vector<double> max;

  /// `(x - mean) / stddev` with these (a standard deviation of 0, a constant input, becomes 1, which
  /// only shifts it).
  Normalization normalization() const;
  /// The mean over features or channels of |mean|: how far from 0 the inputs sit.
  double mean_magnitude() const;
};

/// Which statistics layout samples of `sample_shape` get for `channel_axis` ("auto", "1" or
/// "last"): images ([C, H, W] or [H, W, C]) per channel, channels at axis 1 or last; auto: last when
/// the last dimension is at most 4 and dimension 1 is larger, else 1. Other shapes: per feature
/// (and an explicit axis is refused). Throws UsageError with one line. Not collective.
StatisticsLayout channel_layout(const std::vector<std::int64_t>& sample_shape, const std::string& channel_axis);

/// Writes `stats` as one JSON object (and a newline): {"path", "rows", "sample_shape",
/// "element_type", "layout", "mean", "std", "min", "max", "count"}, one entry per feature or channel
/// (what `strider-inspect stats --json` prints; non-finite values are null). Not collective.
void write_input_statistics(std::ostream& out, const InputStatistics& stats, const std::string& path,
                            ElementType element_type);

/// Reads what write_input_statistics wrote (the keys it needs: "sample_shape", "layout", "rows",
/// "mean", "std"; "count", "min" and "max" when present). Throws DataError with one line naming the
/// file for a file that cannot be read, is not such JSON, or whose layout, means and standard
/// deviations do not agree. Not collective.
InputStatistics read_input_statistics(const std::string& path);

/// Collective over comm: every rank must call, with its reader of the same fixed-size dataset (open
/// on every rank; read() is called from this thread). Statistics over rows [0, rows) (rows <= 0:
/// every row), each rank reading its contiguous share in blocks of about 16 MiB, converted to
/// float32 by ElementConversion. `progress`, when set, is called on rank 0 with the percentage of
/// its share read, every 10%. Read errors are agreed (AgreedError on every rank).
InputStatistics compute_input_statistics(const Communicator& comm, BatchReader& reader, StatisticsLayout layout,
                                         std::int64_t rows = 0, const std::function<void(int)>& progress = {});

}  // namespace strider
