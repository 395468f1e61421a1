#include "gpu_test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <type_traits>

#include "device/element_values.hpp"
#include "strider/sampling/random.hpp"

namespace strider::gpu_testing {
namespace {

double unit(std::uint64_t seed, std::uint64_t index) {
  return static_cast<double>(mix64(mix64(seed) ^ index) >> 11) * 0x1.0p-53;
}

std::shared_ptr<HostAllocator> pinned() {
  static const std::shared_ptr<HostAllocator> allocator = make_pinned_allocator();
  return allocator;
}

}  // namespace

PinnedBatch make_feature_batch(std::int64_t count, std::int64_t features, ElementType type, int classes,
                               std::uint64_t seed) {
  PinnedBatch batch;
  batch.samples = HostBuffer(pinned(), static_cast<std::size_t>(count * features) * element_bytes(type));
  batch.labels = HostBuffer(pinned(), static_cast<std::size_t>(count) * sizeof(std::int32_t));
  auto* labels = reinterpret_cast<std::int32_t*>(batch.labels.data());
  strider::detail::with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < count; ++i) {
      const auto label = static_cast<std::int32_t>(mix64(seed + static_cast<std::uint64_t>(i)) % classes);
      labels[i] = label;
      for (std::int64_t f = 0; f < features; ++f) {
        const double noise = unit(seed, static_cast<std::uint64_t>(i * features + f));
        double value = 0.0;
        if constexpr (std::is_floating_point_v<T>) {
          value = 2.0 * noise - 1.0 + (f == label % features ? 2.0 : 0.0);
        } else {
          value = std::floor(noise * 5.0) + (std::is_signed_v<T> ? -2.0 : 0.0) + (f == label % features ? 3.0 : 0.0);
        }
        const T element = static_cast<T>(value);
        std::memcpy(batch.samples.data() + (i * features + f) * static_cast<std::int64_t>(sizeof(T)), &element,
                    sizeof(T));
      }
    }
  });
  batch.input.samples = batch.samples.data();
  batch.input.type = type;
  batch.input.count = count;
  batch.input.features = features;
  batch.input.labels = labels;
  return batch;
}

PinnedBatch make_token_batch(std::int64_t count, ElementType type, int classes, std::int64_t vocab,
                             std::int64_t max_tokens, std::int64_t first_offset, std::uint64_t seed) {
  PinnedBatch batch;
  batch.offsets = HostBuffer(pinned(), static_cast<std::size_t>(count + 1) * sizeof(std::int64_t));
  batch.labels = HostBuffer(pinned(), static_cast<std::size_t>(count) * sizeof(std::int32_t));
  auto* offsets = reinterpret_cast<std::int64_t*>(batch.offsets.data());
  auto* labels = reinterpret_cast<std::int32_t*>(batch.labels.data());
  offsets[0] = first_offset;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto length = static_cast<std::int64_t>(mix64(seed * 31 + static_cast<std::uint64_t>(i)) %
                                                  static_cast<std::uint64_t>(max_tokens + 1));
    offsets[i + 1] = offsets[i] + length;
    labels[i] = static_cast<std::int32_t>(mix64(seed + 7 * static_cast<std::uint64_t>(i)) % classes);
  }
  const std::int64_t tokens = offsets[count] - offsets[0];
  batch.samples =
      HostBuffer(pinned(), static_cast<std::size_t>(std::max<std::int64_t>(tokens, 1)) * element_bytes(type));
  strider::detail::with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      for (std::int64_t i = 0; i < count; ++i) {
        for (std::int64_t t = offsets[i] - offsets[0]; t < offsets[i + 1] - offsets[0]; ++t) {
          // Mostly ids near the label (learnable), some beyond vocab or negative (hashed).
          const std::uint64_t draw = mix64(seed ^ (static_cast<std::uint64_t>(t) << 1));
          std::int64_t id = labels[i] * 5 + static_cast<std::int64_t>(draw % 5);
          if (draw % 11 == 0) id += 3 * vocab + 1;
          if (std::is_signed_v<T> && draw % 13 == 0) id = -id - 1;
          const T element = static_cast<T>(id);
          std::memcpy(batch.samples.data() + t * static_cast<std::int64_t>(sizeof(T)), &element, sizeof(T));
        }
      }
    }
  });
  batch.input.samples = batch.samples.data();
  batch.input.type = type;
  batch.input.count = count;
  batch.input.features = 0;
  batch.input.labels = labels;
  batch.input.offsets = offsets;
  return batch;
}

ElementwiseComparison compare_per_element(const std::vector<float>& cuda, const std::vector<float>& cpu,
                                          double relative, double absolute) {
  ElementwiseComparison result;
  if (cuda.size() != cpu.size()) {
    result.outside = static_cast<std::int64_t>(std::max(cuda.size(), cpu.size()));
    return result;
  }
  double worst_excess = -1.0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double a = cuda[i], b = cpu[i];
    const double bound = relative * std::fabs(b) + absolute;
    double excess = 0.0;
    if (std::isnan(a) || std::isnan(b)) {
      excess = std::isnan(a) && std::isnan(b) ? 0.0 : std::numeric_limits<double>::infinity();
    } else if (std::fabs(a - b) > bound) {
      excess = std::fabs(a - b) - bound;
    } else {
      continue;
    }
    if (excess == 0.0) continue;
    ++result.outside;
    if (excess > worst_excess) {
      worst_excess = excess;
      result.worst = static_cast<std::int64_t>(i);
      result.cuda = a;
      result.cpu = b;
      result.bound = bound;
    }
  }
  return result;
}

std::ostream& operator<<(std::ostream& out, const ElementwiseComparison& comparison) {
  out << comparison.outside << " element(s) outside the bound";
  if (comparison.worst >= 0)
    out << "; worst at " << comparison.worst << ": cuda " << comparison.cuda << ", cpu " << comparison.cpu
        << ", allowed difference " << comparison.bound;
  return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double largest = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::fabs(static_cast<double>(a[i]) - b[i]));
  return largest;
}

double max_abs(const std::vector<float>& a) {
  double largest = 0.0;
  for (float value : a)
    if (!std::isnan(value)) largest = std::max(largest, std::fabs(static_cast<double>(value)));
  return largest;
}

}  // namespace strider::gpu_testing
