// Per-feature or per-channel statistics of fixed-size samples, merged across blocks and ranks.
#include "strider/train/input_statistics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include "strider/core/error.hpp"
#include "strider/core/json_writer.hpp"

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

/// Just enough JSON for a statistics file: one object whose values are strings, numbers, null
/// (a non-finite number) or arrays of numbers. Throws DataError naming the file.
class StatisticsFile {
 public:
  explicit StatisticsFile(const std::string& path) : path_(path) {
    std::ifstream file(path);
    if (!file) fail("cannot be read");
    std::ostringstream text;
    text << file.rdbuf();
    text_ = text.str();
    expect('{');
    if (!consume('}')) {
      do {
        const std::string key = string();
        expect(':');
        skip_space();
        if (peek() == '"') {
          strings_[key] = string();
        } else if (consume('[')) {
          std::vector<double>& values = arrays_[key];
          if (!consume(']')) {
            do values.push_back(number());
            while (consume(','));
            expect(']');
          }
        } else {
          numbers_[key] = number();
        }
      } while (consume(','));
      expect('}');
    }
    skip_space();
    if (position_ != text_.size()) fail("has text after its JSON object");
  }

  [[noreturn]] void fail(const std::string& why) const {
    STRIDER_THROW(DataError, "statistics file " + path_ + " " + why +
                                 " (write it with strider-inspect stats DATA --json > FILE.json)");
  }
  const std::string& text(const std::string& key) const {
    const auto found = strings_.find(key);
    if (found == strings_.end()) fail("has no \"" + key + "\"");
    return found->second;
  }
  double scalar(const std::string& key) const {
    const auto found = numbers_.find(key);
    if (found == numbers_.end()) fail("has no \"" + key + "\"");
    return found->second;
  }
  const std::vector<double>& array(const std::string& key) const {
    static const std::vector<double> none;
    const auto found = arrays_.find(key);
    return found == arrays_.end() ? none : found->second;
  }
  bool has_array(const std::string& key) const { return arrays_.count(key) > 0; }

 private:
  void skip_space() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_]))) ++position_;
  }
  char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }
  bool consume(char c) {
    skip_space();
    if (peek() != c) return false;
    ++position_;
    return true;
  }
  void expect(char c) {
    if (!consume(c))
      fail(std::string("is not a statistics JSON object (expected '") + c + "' at byte " + std::to_string(position_) +
           ")");
  }
  std::string string() {
    expect('"');
    std::string value;
    while (peek() != '"') {
      if (peek() == '\0') fail("has an unterminated string");
      if (peek() == '\\') ++position_;
      value += text_[position_++];
    }
    ++position_;
    return value;
  }
  double number() {
    skip_space();
    if (text_.compare(position_, 4, "null") == 0) {
      position_ += 4;
      return std::numeric_limits<double>::quiet_NaN();
    }
    const char* begin = text_.c_str() + position_;
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin) fail("has something other than a number at byte " + std::to_string(position_));
    position_ += static_cast<std::size_t>(end - begin);
    return value;
  }

  std::string path_;
  std::string text_;
  std::size_t position_ = 0;
  std::map<std::string, std::string> strings_;
  std::map<std::string, double> numbers_;
  std::map<std::string, std::vector<double>> arrays_;
};

}  // namespace

void write_input_statistics(std::ostream& out, const InputStatistics& stats, const std::string& path,
                            ElementType element_type) {
  JsonWriter writer(out);
  writer.begin_object();
  writer.field("path", path);
  writer.field("rows", stats.rows);
  writer.key("sample_shape");
  writer.array(stats.sample_shape);
  writer.field("element_type", element_name(element_type));
  writer.field("layout", statistics_layout_name(stats.layout));
  for (const auto& [name, values] : {std::pair{"mean", &stats.mean}, std::pair{"std", &stats.stddev},
                                     std::pair{"min", &stats.min}, std::pair{"max", &stats.max}}) {
    writer.key(name);
    writer.array(*values);
  }
  writer.key("count");
  writer.array(stats.count);
  writer.end_object();
  out << '\n';
}

InputStatistics read_input_statistics(const std::string& path) {
  const StatisticsFile file(path);
  InputStatistics stats;
  const std::string& layout = file.text("layout");
  bool known = false;
  for (StatisticsLayout candidate :
       {StatisticsLayout::per_feature, StatisticsLayout::channels_first, StatisticsLayout::channels_last})
    if (layout == statistics_layout_name(candidate)) {
      stats.layout = candidate;
      known = true;
    }
  if (!known) file.fail("has layout '" + layout + "' (per-feature, channels-first or channels-last)");
  for (double extent : file.array("sample_shape")) {
    if (!(extent >= 1) || extent != std::floor(extent)) file.fail("has a sample_shape that is not positive integers");
    stats.sample_shape.push_back(static_cast<std::int64_t>(extent));
  }
  if (stats.sample_shape.empty()) file.fail("has no \"sample_shape\"");
  stats.rows = static_cast<std::int64_t>(file.scalar("rows"));
  stats.mean = file.array("mean");
  stats.stddev = file.array("std");
  stats.min = file.array("min");
  stats.max = file.array("max");
  for (double count : file.array("count")) stats.count.push_back(static_cast<std::int64_t>(count));
  const std::int64_t features = std::accumulate(stats.sample_shape.begin(), stats.sample_shape.end(), std::int64_t{1},
                                                std::multiplies<std::int64_t>());
  const std::int64_t groups = stats.layout == StatisticsLayout::channels_first  ? stats.sample_shape.front()
                              : stats.layout == StatisticsLayout::channels_last ? stats.sample_shape.back()
                                                                                : features;
  if (static_cast<std::int64_t>(stats.mean.size()) != groups || stats.stddev.size() != stats.mean.size())
    file.fail("has " + std::to_string(stats.mean.size()) + " means and " + std::to_string(stats.stddev.size()) +
              " standard deviations; " + layout + " statistics of samples of " + std::to_string(features) +
              " elements need " + std::to_string(groups) + " of each");
  for (std::size_t g = 0; g < stats.mean.size(); ++g)
    if (!std::isfinite(stats.mean[g]) || !std::isfinite(stats.stddev[g]) || stats.stddev[g] < 0)
      file.fail("has a mean or standard deviation that is not a finite number (entry " + std::to_string(g) + ")");
  return stats;
}

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
