// The element conversion on the CPU: the checks of the options, the per-feature statistics, and
// the conversion itself (the CUDA kernel in src/device/cuda/element_conversion.cu does the same
// operations in the same order).
#include "strider/device/element_conversion.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>

#include "device/element_values.hpp"
#include "strider/core/error.hpp"

namespace strider {
namespace {

/// The stored float16 bits, as a distinct type for the dispatch below.
struct Float16Bits {
  std::uint16_t bits;
};

template <typename T>
float load_float(const std::byte* base, std::int64_t index) noexcept {
  T value;
  std::memcpy(&value, base + index * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  if constexpr (std::is_same_v<T, Float16Bits>) {
    return float16_to_float32(value.bits);
  } else {
    return static_cast<float>(value);
  }
}

// out[i] for i < rows * features, element by element in index order.
template <typename In, bool to_float16, bool normalize>
void convert_rows(const std::byte* in, std::int64_t rows, std::int64_t features, const float* means,
                  const float* stddevs, std::byte* out) noexcept {
  std::int64_t index = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t feature = 0; feature < features; ++feature, ++index) {
      float value = load_float<In>(in, index);
      if constexpr (normalize) {
        const float shifted = value - means[feature];
        value = shifted / stddevs[feature];
      }
      if constexpr (to_float16) {
        const std::uint16_t bits = float32_to_float16(value);
        std::memcpy(out + index * 2, &bits, 2);
      } else {
        std::memcpy(out + index * 4, &value, 4);
      }
    }
  }
}

template <typename In>
void convert_from(const ElementConversion& conversion, const std::byte* in, std::int64_t rows, std::byte* out) {
  const std::int64_t features = conversion.features();
  const float* means = conversion.feature_means().data();
  const float* stddevs = conversion.feature_stddevs().data();
  const bool to_float16 = conversion.output_type() == ElementType::float16;
  if (conversion.normalizes()) {
    if (to_float16)
      convert_rows<In, true, true>(in, rows, features, means, stddevs, out);
    else
      convert_rows<In, false, true>(in, rows, features, means, stddevs, out);
  } else {
    if (to_float16)
      convert_rows<In, true, false>(in, rows, features, means, stddevs, out);
    else
      convert_rows<In, false, false>(in, rows, features, means, stddevs, out);
  }
}

std::string value_text(float value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string count_text(std::size_t count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

// Throws UsageError unless the statistics fit samples of `features` elements and are usable.
void check_normalization(const Normalization& normalization, std::int64_t features) {
  const std::size_t means = normalization.mean.size();
  const std::size_t stddevs = normalization.stddev.size();
  const char* layout = statistics_layout_name(normalization.layout);
  STRIDER_REQUIRE(means == stddevs, std::string(layout) + " normalization has " + count_text(means, "mean") + " but " +
                                        count_text(stddevs, "standard deviation"));
  if (normalization.layout == StatisticsLayout::per_feature) {
    STRIDER_REQUIRE(static_cast<std::int64_t>(means) == features,
                    "per-feature normalization needs one mean and one standard deviation per element of a sample (" +
                        std::to_string(features) + "), got " + std::to_string(means));
  } else {
    STRIDER_REQUIRE(means > 0 && features % static_cast<std::int64_t>(means) == 0,
                    std::string(layout) + " normalization with " + count_text(means, "channel") +
                        " does not fit samples of " + std::to_string(features) +
                        " elements (the channel count must divide it)");
  }
  for (std::size_t k = 0; k < means; ++k) {
    const float mean = normalization.mean[k];
    const float stddev = normalization.stddev[k];
    STRIDER_REQUIRE(std::isfinite(mean), "normalization mean[" + std::to_string(k) + "] is " + value_text(mean) +
                                             ": every mean must be finite");
    STRIDER_REQUIRE(std::isfinite(stddev) && stddev > 0.0f,
                    "normalization stddev[" + std::to_string(k) + "] is " + value_text(stddev) +
                        ": every standard deviation must be finite and positive (use 1 for a constant feature)");
  }
}

}  // namespace

const char* statistics_layout_name(StatisticsLayout layout) noexcept {
  switch (layout) {
    case StatisticsLayout::per_feature:
      return "per-feature";
    case StatisticsLayout::channels_first:
      return "channels-first";
    case StatisticsLayout::channels_last:
      return "channels-last";
  }
  return "?";
}

ElementConversion::ElementConversion(ElementType input, std::int64_t features, const ConversionOptions& options)
    : input_(input), output_(options.output.value_or(input)), features_(features) {
  STRIDER_REQUIRE(features >= 1,
                  "converting samples needs at least one element per sample, got " + std::to_string(features));
  if (options.output) {
    STRIDER_REQUIRE(*options.output == ElementType::float32 || *options.output == ElementType::float16,
                    std::string("samples convert to float32 or float16, not to ") + element_name(*options.output));
  }
  if (!options.normalization) return;
  STRIDER_REQUIRE(options.output.has_value(),
                  "normalization needs a float output type: set ConversionOptions::output to float32 or float16");
  const Normalization& normalization = *options.normalization;
  check_normalization(normalization, features);
  const auto channels = static_cast<std::int64_t>(normalization.mean.size());
  feature_means_.resize(static_cast<std::size_t>(features));
  feature_stddevs_.resize(static_cast<std::size_t>(features));
  for (std::int64_t f = 0; f < features; ++f) {
    std::int64_t k = f;
    if (normalization.layout == StatisticsLayout::channels_first) k = f / (features / channels);
    if (normalization.layout == StatisticsLayout::channels_last) k = f % channels;
    feature_means_[static_cast<std::size_t>(f)] = normalization.mean[static_cast<std::size_t>(k)];
    feature_stddevs_[static_cast<std::size_t>(f)] = normalization.stddev[static_cast<std::size_t>(k)];
  }
}

void ElementConversion::convert(const std::byte* in, std::int64_t rows, std::byte* out) const {
  STRIDER_REQUIRE(rows >= 0, "converting a negative number of samples: " + std::to_string(rows));
  if (rows == 0) return;
  if (!converts()) {
    std::memcpy(out, in, static_cast<std::size_t>(rows * features_) * element_bytes(input_));
    return;
  }
  detail::with_element_type<Float16Bits>(input_, [&](auto tag) { convert_from<decltype(tag)>(*this, in, rows, out); });
}

}  // namespace strider
