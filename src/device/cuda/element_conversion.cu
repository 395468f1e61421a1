// The element conversion kernel: the same IEEE 754 float32 operations as the CPU's
// ElementConversion::convert, in the same order (round the stored value to float32, subtract the
// mean, divide by the standard deviation, round to the output type). __fsub_rn and __fdiv_rn are
// correctly rounded operations that the compiler never contracts or approximates, whatever
// -prec-div or -fmad say (only -ftz=true, part of --use_fast_math, would flush subnormals).
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "device/cuda/cuda_check.hpp"
#include "device/cuda/element_conversion.cuh"
#include "device/element_values.hpp"

namespace strider::detail {
namespace {

constexpr int threads_per_block = 256;
constexpr std::int64_t max_blocks = 1024;  // 262,144 threads: enough to fill a GPU; larger batches loop

template <typename In>
__device__ inline float load_float(const In* in, std::int64_t index) {
  return static_cast<float>(in[index]);
}
template <>
__device__ inline float load_float<__half>(const __half* in, std::int64_t index) {
  return __half2float(in[index]);
}

__device__ inline void store(float* out, std::int64_t index, float value) {
  out[index] = value;
}
__device__ inline void store(__half* out, std::int64_t index, float value) {
  out[index] = __float2half_rn(value);
}

// A grid-stride loop over the elements. With normalization each thread tracks its element's
// feature by adding the stride modulo `features`, so the loop has no division by `features`.
template <typename In, typename Out, bool normalize>
__global__ void convert_kernel(const In* in, std::int64_t count, std::int64_t features, const float* means,
                               const float* stddevs, Out* out) {
  std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t feature = 0;
  std::int64_t feature_stride = 0;
  if constexpr (normalize) {
    feature = index % features;
    feature_stride = stride % features;
  }
  for (; index < count; index += stride) {
    float value = load_float(in, index);
    if constexpr (normalize) {
      value = __fdiv_rn(__fsub_rn(value, means[feature]), stddevs[feature]);
      feature += feature_stride;
      if (feature >= features) feature -= features;
    }
    store(out, index, value);
  }
}

template <typename In, typename Out>
void launch_typed(cudaStream_t stream, const ElementConversion& conversion, const std::byte* in, std::int64_t rows,
                  const float* means, const float* stddevs, std::byte* out) {
  const std::int64_t features = conversion.features();
  const std::int64_t count = rows * features;
  std::int64_t blocks = (count + threads_per_block - 1) / threads_per_block;
  blocks = blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks);
  const auto* typed_in = reinterpret_cast<const In*>(in);
  auto* typed_out = reinterpret_cast<Out*>(out);
  if (conversion.normalizes()) {
    convert_kernel<In, Out, true><<<static_cast<unsigned int>(blocks), threads_per_block, 0, stream>>>(
        typed_in, count, features, means, stddevs, typed_out);
  } else {
    convert_kernel<In, Out, false><<<static_cast<unsigned int>(blocks), threads_per_block, 0, stream>>>(
        typed_in, count, features, means, stddevs, typed_out);
  }
}

template <typename In>
void launch_from(cudaStream_t stream, const ElementConversion& conversion, const std::byte* in, std::int64_t rows,
                 const float* means, const float* stddevs, std::byte* out) {
  if (conversion.output_type() == ElementType::float16)
    launch_typed<In, __half>(stream, conversion, in, rows, means, stddevs, out);
  else
    launch_typed<In, float>(stream, conversion, in, rows, means, stddevs, out);
}

}  // namespace

void launch_element_conversion(cudaStream_t stream, const ElementConversion& conversion, const std::byte* in,
                               std::int64_t rows, const float* means, const float* stddevs, std::byte* out) {
  STRIDER_REQUIRE(conversion.converts(), "launch_element_conversion: nothing to convert (copy the bytes instead)");
  STRIDER_REQUIRE(!conversion.normalizes() || (means != nullptr && stddevs != nullptr),
                  "launch_element_conversion: the normalization's statistics are not on the device");
  if (rows <= 0) return;
  with_element_type<__half>(conversion.input_type(), [&](auto tag) {
    launch_from<decltype(tag)>(stream, conversion, in, rows, means, stddevs, out);
  });
  STRIDER_CUDA_CHECK(cudaGetLastError(), std::string("launching the conversion of ") + std::to_string(rows) +
                                             " samples from " + element_name(conversion.input_type()) + " to " +
                                             element_name(conversion.output_type()));
}

}  // namespace strider::detail
