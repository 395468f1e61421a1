#pragma once
/// \file
/// The element conversion: samples in their stored element type become float32 or float16, and
/// optionally `(x - mean) / stddev` per feature or per channel. One implementation of the math per
/// device: ElementConversion::convert on the CPU (here), and one CUDA kernel (private, in
/// src/device/cuda/) that device batches and the CUDA backend launch. Both do the same IEEE 754
/// operations in the same order, so they agree bit for bit unless a compiler contracts or
/// approximates them (see the README's CUDA section for the bound the GPU test allows).
///
/// Per element, in this order:
///   1. x = the stored value rounded to float32 (round to nearest, ties to even): exact for float16
///      and for integers of magnitude up to 2^24; float64 beyond float32's range becomes infinity.
///   2. with normalization: y = (x - mean[k]) / stddev[k], in float32 (the subtraction rounded, then
///      the division rounded), k the element's feature or channel; otherwise y = x.
///   3. the output type: float32 as is, float16 rounded to nearest even (overflow to infinity,
///      subnormals kept).
/// NaN stays NaN (quiet; sign and payload not promised) and infinities keep their sign, as IEEE 754
/// says for these operations.
///
/// Samples of F elements. Per feature: F means and F standard deviations. Per channel, C of each
/// (C divides F): channels_first (sample shape [C, ...], element f is in channel f / (F / C)) or
/// channels_last (shape [..., C], channel f % C). One channel normalizes every element alike.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "strider/core/element_type.hpp"
#include "strider/core/float16.hpp"

namespace strider {

/// Which mean and standard deviation an element of a sample uses.
enum class StatisticsLayout {
  per_feature,     ///< element f uses mean[f]
  channels_first,  ///< sample shape [C, ...]: element f uses mean[f / (F / C)]
  channels_last,   ///< sample shape [..., C]: element f uses mean[f % C]
};

/// "per-feature", "channels-first" or "channels-last".
const char* statistics_layout_name(StatisticsLayout layout) noexcept;

/// `(x - mean) / stddev` with one mean and one standard deviation per feature or per channel. Every
/// mean must be finite, every standard deviation finite and positive (a constant feature has
/// standard deviation 0: give it 1, which only shifts it).
struct Normalization {
  StatisticsLayout layout = StatisticsLayout::per_feature;
  std::vector<float> mean;
  std::vector<float> stddev;  ///< as many as mean
};

/// What a batch's samples become.
struct ConversionOptions {
  /// The output element type: float32 or float16; nullopt keeps the stored type and bytes.
  std::optional<ElementType> output;
  /// Normalization of the converted values (needs an output type).
  std::optional<Normalization> normalization;
};

/// A checked conversion of samples of one element type and size. Copyable; immutable, so one
/// object may be used by several threads at once.
class ElementConversion {
 public:
  /// Checks the options against samples of `features` elements of `input` and expands per-channel
  /// statistics to one per feature. Throws UsageError with one line naming the problem: an output
  /// type other than float32 or float16, normalization without an output type, statistics whose
  /// count does not fit the samples, a mean that is not finite, a standard deviation that is not
  /// finite and positive, or `features` < 1. Not collective.
  ElementConversion(ElementType input, std::int64_t features, const ConversionOptions& options);

  ElementType input_type() const noexcept { return input_; }
  /// The type convert() writes (input_type() when nothing is converted).
  ElementType output_type() const noexcept { return output_; }
  /// Elements per sample.
  std::int64_t features() const noexcept { return features_; }
  /// False when convert() copies the bytes as stored.
  bool converts() const noexcept { return output_ != input_ || normalizes(); }
  bool normalizes() const noexcept { return !feature_means_.empty(); }
  /// features() means and standard deviations, one per element of a sample (per-channel statistics
  /// repeated for each element of the channel); empty without normalization.
  const std::vector<float>& feature_means() const noexcept { return feature_means_; }
  const std::vector<float>& feature_stddevs() const noexcept { return feature_stddevs_; }

  /// Converts `rows` samples, rows * features() elements of input_type() at `in`, to output_type()
  /// at `out` (neither needs any alignment; they must not overlap). Not collective; thread-safe.
  void convert(const std::byte* in, std::int64_t rows, std::byte* out) const;

 private:
  ElementType input_;
  ElementType output_;
  std::int64_t features_;
  std::vector<float> feature_means_;
  std::vector<float> feature_stddevs_;
};

}  // namespace strider
