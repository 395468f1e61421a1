// Per-feature or per-channel statistics of fixed-size samples, merged across blocks and ranks.
#include "strider/train/input_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "strider/core/error.hpp"

namespace strider {
namespace {

/// Count, mean and sum of squared deviations from the mean (M2) of some values.
struct Moments {
  double count = 0.0;
  double mean = 0.0;
  double m2 = 0.0;
  /// Chan et al.: the moments of both sets of values together.
  void merge(const Moments& other) {
    if (other.count == 0.0) return;
    const double total = count + other.count;
    const double delta = other.mean - mean;
    mean += delta * (other.count / total);
    m2 += other.m2 + delta * delta * (count * other.count / total);
    count = total;
  }
};

}  // namespace

Normalization InputStatistics::normalization() const {
  Normalization normalization;
  normalization.layout = layout;
  for (std::size_t g = 0; g < mean.size(); ++g) {
    normalization.mean.push_back(static_cast<float>(mean[g]));
    const auto deviation = static_cast<float>(stddev[g]);
    normalization.stddev.push_back(deviation > 0.0f ? deviation : 1.0f);
  }
  return normalization;
}

double InputStatistics::mean_magnitude() const {
  double sum = 0.0;
  for (double value : mean) sum += std::abs(value);
  return mean.empty() ? 0.0 : sum / static_cast<double>(mean.size());
}

StatisticsLayout channel_layout(const std::vector<std::int64_t>& sample_shape, const std::string& channel_axis) {
  if (channel_axis != "auto" && channel_axis != "1" && channel_axis != "last")
    STRIDER_THROW(UsageError, "--channel-axis must be auto, 1 or last, got '" + channel_axis + "'");
  if (sample_shape.size() != 3) {
    if (channel_axis != "auto")
      STRIDER_THROW(UsageError, "--channel-axis " + channel_axis +
                                    " needs image samples ([N, C, H, W] or [N, H, W, C]); these samples have " +
                                    std::to_string(sample_shape.size()) + " dimensions (statistics per feature)");
    return StatisticsLayout::per_feature;
  }
  if (channel_axis == "1") return StatisticsLayout::channels_first;
  if (channel_axis == "last") return StatisticsLayout::channels_last;
  return sample_shape.back() <= 4 && sample_shape.front() > sample_shape.back() ? StatisticsLayout::channels_last
                                                                                : StatisticsLayout::channels_first;
}

InputStatistics compute_input_statistics(const Communicator& comm, BatchReader& reader, StatisticsLayout layout,
                                         std::int64_t rows, const std::function<void(int)>& progress) {
  const DatasetInfo& info = reader.info();
  InputStatistics result;
  std::int64_t features = 0, groups = 0;
  comm.collective_try([&] {
    if (info.variable_length)
      STRIDER_THROW(UsageError, "statistics need fixed-size samples; " + info.path + " holds token sequences");
    features = std::accumulate(info.sample_shape.begin(), info.sample_shape.end(), std::int64_t{1},
                               std::multiplies<std::int64_t>());
    groups = layout == StatisticsLayout::channels_first  ? (info.sample_shape.empty() ? 0 : info.sample_shape.front())
             : layout == StatisticsLayout::channels_last ? (info.sample_shape.empty() ? 0 : info.sample_shape.back())
                                                         : features;
    if (groups < 1 || features % groups != 0)
      STRIDER_THROW(UsageError, std::string("statistics ") + statistics_layout_name(layout) +
                                    " do not fit samples of " + std::to_string(features) + " elements");
  });
  result.layout = layout;
  result.sample_shape = info.sample_shape;
  result.rows = rows > 0 ? std::min(rows, info.num_samples) : info.num_samples;
  const std::int64_t first = result.rows * comm.rank() / comm.size();
  const std::int64_t last = result.rows * (comm.rank() + 1) / comm.size();
  const std::int64_t block_rows = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / info.sample_bytes);
  const std::int64_t per_group = layout == StatisticsLayout::channels_first ? features / groups : 1;
  const auto group_of = [&](std::int64_t f) {
    return static_cast<std::size_t>(layout == StatisticsLayout::channels_last ? f % groups : f / per_group);
  };

  std::vector<Moments> moments(static_cast<std::size_t>(groups));
  result.min.assign(moments.size(), std::numeric_limits<double>::infinity());
  result.max.assign(moments.size(), -std::numeric_limits<double>::infinity());
  comm.collective_try([&] {
    const ElementConversion conversion(info.element_type, features, ConversionOptions{ElementType::float32, {}});
    std::vector<std::int64_t> indices;
    std::vector<std::byte> stored(static_cast<std::size_t>(std::min(block_rows, last - first) * info.sample_bytes));
    std::vector<float> values(static_cast<std::size_t>(std::min(block_rows, last - first) * features));
    std::vector<Moments> block(moments.size());
    int shown = 0;
    for (std::int64_t begin = first; begin < last; begin += block_rows) {
      const std::int64_t count = std::min(block_rows, last - begin);
      indices.resize(static_cast<std::size_t>(count));
      std::iota(indices.begin(), indices.end(), begin);
      reader.read(indices.data(), count,
                  BatchDestination{stored.data(), static_cast<std::int64_t>(stored.size()), nullptr, nullptr});
      conversion.convert(stored.data(), count, reinterpret_cast<std::byte*>(values.data()));
      // Two passes over the block (its means, then the squared deviations from them), then one
      // merge per feature or channel.
      std::fill(block.begin(), block.end(), Moments{});
      for (std::int64_t i = 0; i < count * features; ++i) {
        const double x = values[static_cast<std::size_t>(i)];
        const std::size_t g = group_of(i % features);
        block[g].count += 1.0;
        block[g].mean += x;
        result.min[g] = std::min(result.min[g], x);
        result.max[g] = std::max(result.max[g], x);
      }
      for (Moments& m : block) m.mean /= m.count;
      for (std::int64_t i = 0; i < count * features; ++i) {
        Moments& m = block[group_of(i % features)];
        const double deviation = values[static_cast<std::size_t>(i)] - m.mean;
        m.m2 += deviation * deviation;
      }
      for (std::size_t g = 0; g < moments.size(); ++g) moments[g].merge(block[g]);
      const int percent = static_cast<int>((begin + count - first) * 100 / (last - first));
      if (progress && comm.is_root() && percent / 10 > shown / 10) progress(shown = percent);
    }
  });

  // Across ranks: each rank's moments in its own slot of a zeroed buffer, summed, then merged in
  // rank order (the same order, hence the same bits, on every rank).
  std::vector<double> all(static_cast<std::size_t>(comm.size()) * moments.size() * 3, 0.0);
  for (std::size_t g = 0; g < moments.size(); ++g) {
    const std::size_t at = (static_cast<std::size_t>(comm.rank()) * moments.size() + g) * 3;
    all[at] = moments[g].count;
    all[at + 1] = moments[g].mean;
    all[at + 2] = moments[g].m2;
  }
  comm.all_reduce(all.data(), static_cast<std::int64_t>(all.size()), ReduceOp::sum);
  comm.all_reduce(result.min.data(), groups, ReduceOp::min);
  comm.all_reduce(result.max.data(), groups, ReduceOp::max);
  std::vector<Moments> total(moments.size());
  for (int rank = 0; rank < comm.size(); ++rank)
    for (std::size_t g = 0; g < total.size(); ++g) {
      const std::size_t at = (static_cast<std::size_t>(rank) * total.size() + g) * 3;
      total[g].merge(Moments{all[at], all[at + 1], all[at + 2]});
    }
  for (const Moments& m : total) {
    result.count.push_back(static_cast<std::int64_t>(m.count));
    result.mean.push_back(m.mean);
    result.stddev.push_back(m.count > 0 ? std::sqrt(m.m2 / m.count) : 0.0);
  }
  return result;
}

}  // namespace strider
