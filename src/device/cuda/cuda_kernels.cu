// The CUDA backend's fp32 kernels: grid-stride loops, one thread per output element, sums in index
// order like the CPU models (so results agree within float rounding), with the CPU models' IEEE
// behaviour: zero inputs are skipped in products (0 * inf adds nothing on either backend) and the
// ReLU keeps NaN (device/activation.hpp). Parameter gradients of narrow layers split the batch
// into chunks summed in a second pass, in chunk order, so that they use enough threads and stay
// deterministic. Deterministic except the bag model's embedding gradients (atomicAdd: summation
// order varies between runs).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "device/activation.hpp"
#include "device/cuda/cuda_check.hpp"
#include "device/cuda/cuda_kernels.cuh"
#include "device/cuda/element_conversion.cuh"
#include "device/element_values.hpp"

namespace strider::detail::kernels {
namespace {

constexpr int threads_per_block = 256;
constexpr std::int64_t default_block_limit = 1 << 20;
std::int64_t block_limit = default_block_limit;

// Enough blocks for `elements` threads, at most block_limit (the loops stride over the rest).
unsigned int blocks_for(std::int64_t elements) {
  const std::int64_t blocks = (elements + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned int>(std::clamp<std::int64_t>(blocks, 1, block_limit));
}

// Parameter gradients: a layer with fewer outputs than this many threads splits the batch into
// chunks of at least min_chunk_rows rows (one thread per output and chunk).
constexpr std::int64_t gradient_thread_target = 1 << 16;
constexpr std::int64_t min_chunk_rows = 32;

std::int64_t gradient_chunks(std::int64_t n, std::int64_t outputs) {
  const std::int64_t by_threads = gradient_thread_target / std::max<std::int64_t>(outputs, 1);
  const std::int64_t by_rows = (n + min_chunk_rows - 1) / min_chunk_rows;
  return std::max<std::int64_t>(1, std::min(by_threads, by_rows));
}

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t index_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

void check_launch(const char* what) {
  STRIDER_CUDA_CHECK(cudaGetLastError(), what);
}

template <typename T>
__global__ void bucket_kernel(const T* in, std::int64_t count, std::int64_t vocab, std::int64_t* buckets) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    if constexpr (std::is_signed_v<T>) {
      std::int64_t bucket = static_cast<std::int64_t>(in[i]) % vocab;
      buckets[i] = bucket < 0 ? bucket + vocab : bucket;
    } else {
      buckets[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(in[i]) % static_cast<std::uint64_t>(vocab));
    }
  }
}

__global__ void affine_forward_kernel(const float* in, std::int64_t n, std::int64_t rows, const float* weights,
                                      const float* bias, std::int64_t cols, bool relu, float* out) {
  for (std::int64_t index = first_index(); index < n * cols; index += index_stride()) {
    const std::int64_t i = index / cols;
    const std::int64_t c = index % cols;
    const float* row = in + i * rows;
    float sum = bias[c];
    for (std::int64_t r = 0; r < rows; ++r) {
      const float value = row[r];
      if (value != 0.0f) sum += value * weights[r * cols + c];
    }
    out[index] = relu ? strider::detail::relu(sum) : sum;
  }
}

// Outputs [0, rows*cols) are weight gradients, [rows*cols, rows*cols + cols) bias gradients. Each
// thread sums rows [first, end) of the batch for one output.
__device__ inline float parameter_gradient_sum(const float* in, std::int64_t first, std::int64_t end, std::int64_t rows,
                                               const float* out_gradients, std::int64_t cols, std::int64_t output) {
  float sum = 0.0f;
  if (output < rows * cols) {
    const std::int64_t r = output / cols;
    const std::int64_t c = output % cols;
    for (std::int64_t i = first; i < end; ++i) {
      const float value = in[i * rows + r];
      if (value != 0.0f) sum += value * out_gradients[i * cols + c];
    }
  } else {
    const std::int64_t c = output - rows * cols;
    for (std::int64_t i = first; i < end; ++i) sum += out_gradients[i * cols + c];
  }
  return sum;
}

// One pass: every output sums the whole batch and adds to the gradient buffers.
__global__ void affine_parameter_gradients_kernel(const float* in, std::int64_t n, std::int64_t rows,
                                                  const float* out_gradients, std::int64_t cols,
                                                  float* weight_gradients, float* bias_gradients) {
  const std::int64_t weights = rows * cols;
  for (std::int64_t output = first_index(); output < weights + cols; output += index_stride()) {
    const float sum = parameter_gradient_sum(in, 0, n, rows, out_gradients, cols, output);
    if (output < weights)
      weight_gradients[output] += sum;
    else
      bias_gradients[output - weights] += sum;
  }
}

// First of two passes: partials[chunk * outputs + output] = the sum over the chunk's rows.
__global__ void affine_parameter_partials_kernel(const float* in, std::int64_t n, std::int64_t rows,
                                                 const float* out_gradients, std::int64_t cols, std::int64_t chunks,
                                                 float* partials) {
  const std::int64_t outputs = rows * cols + cols;
  const std::int64_t chunk_rows = (n + chunks - 1) / chunks;
  for (std::int64_t index = first_index(); index < chunks * outputs; index += index_stride()) {
    const std::int64_t chunk = index / outputs;
    const std::int64_t first = chunk * chunk_rows;
    const std::int64_t end = first + chunk_rows < n ? first + chunk_rows : n;
    partials[index] = parameter_gradient_sum(in, first, end, rows, out_gradients, cols, index % outputs);
  }
}

// Second pass: each output adds its chunks' partial sums, in chunk order.
__global__ void affine_parameter_chunks_kernel(const float* partials, std::int64_t chunks, std::int64_t rows,
                                               std::int64_t cols, float* weight_gradients, float* bias_gradients) {
  const std::int64_t weights = rows * cols;
  const std::int64_t outputs = weights + cols;
  for (std::int64_t output = first_index(); output < outputs; output += index_stride()) {
    float sum = 0.0f;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * outputs + output];
    if (output < weights)
      weight_gradients[output] += sum;
    else
      bias_gradients[output - weights] += sum;
  }
}

__global__ void affine_input_gradients_kernel(const float* weights, std::int64_t n, std::int64_t rows,
                                              const float* out_gradients, std::int64_t cols, const float* mask,
                                              float* in_gradients) {
  for (std::int64_t index = first_index(); index < n * rows; index += index_stride()) {
    const std::int64_t i = index / rows;
    const std::int64_t r = index % rows;
    float sum = 0.0f;
    if (mask == nullptr || strider::detail::relu_passes_gradient(mask[index])) {
      const float* gradient_row = out_gradients + i * cols;
      const float* weight_row = weights + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) sum += weight_row[c] * gradient_row[c];
    }
    in_gradients[index] = sum;
  }
}

__global__ void add_bias_kernel(float* out, std::int64_t n, const float* bias, std::int64_t cols, bool relu) {
  for (std::int64_t index = first_index(); index < n * cols; index += index_stride()) {
    const float sum = out[index] + bias[index % cols];
    out[index] = relu ? strider::detail::relu(sum) : sum;
  }
}

__global__ void mask_relu_gradients_kernel(const float* mask, std::int64_t count, float* gradients) {
  for (std::int64_t index = first_index(); index < count; index += index_stride()) {
    if (!strider::detail::relu_passes_gradient(mask[index])) gradients[index] = 0.0f;
  }
}

__global__ void fill_kernel(float* values, std::int64_t count, float value) {
  for (std::int64_t index = first_index(); index < count; index += index_stride()) values[index] = value;
}

__device__ int row_argmax(const float* logits, int classes) {
  int best = 0;
  for (int c = 1; c < classes; ++c) {
    if (logits[c] > logits[best]) best = c;
  }
  return best;
}

__global__ void cross_entropy_kernel(const float* logits, std::int64_t n, int classes, const std::int32_t* labels,
                                     double* losses, std::int32_t* correct, float* logit_gradients) {
  for (std::int64_t i = first_index(); i < n; i += index_stride()) {
    const float* row = logits + i * classes;
    float* gradient_row = logit_gradients + i * classes;
    const int label = labels[i];
    const int best = row_argmax(row, classes);
    const double largest = row[best];
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += exp(static_cast<double>(row[c]) - largest);
    const double log_total = log(total);
    for (int c = 0; c < classes; ++c) {
      const double probability = exp(static_cast<double>(row[c]) - largest - log_total);
      gradient_row[c] = static_cast<float>(probability - (c == label ? 1.0 : 0.0));
    }
    correct[i] = best == label ? 1 : 0;
    losses[i] = largest + log_total - static_cast<double>(row[label]);
  }
}

__global__ void argmax_kernel(const float* logits, std::int64_t n, int classes, std::int32_t* predictions) {
  for (std::int64_t i = first_index(); i < n; i += index_stride())
    predictions[i] = row_argmax(logits + i * classes, classes);
}

__global__ void bag_mean_kernel(const float* embeddings, std::int64_t width, const std::int64_t* buckets,
                                const std::int64_t* offsets, std::int64_t n, float* means) {
  for (std::int64_t index = first_index(); index < n * width; index += index_stride()) {
    const std::int64_t i = index / width;
    const std::int64_t d = index % width;
    const std::int64_t first = offsets[i] - offsets[0];
    const std::int64_t end = offsets[i + 1] - offsets[0];
    float sum = 0.0f;
    for (std::int64_t t = first; t < end; ++t) sum += embeddings[buckets[t] * width + d];
    if (end > first) sum *= 1.0f / static_cast<float>(end - first);
    means[index] = sum;
  }
}

__global__ void bag_embedding_gradients_kernel(const float* mean_gradients, std::int64_t width,
                                               const std::int64_t* buckets, const std::int64_t* offsets, std::int64_t n,
                                               float* embedding_gradients) {
  for (std::int64_t index = first_index(); index < n * width; index += index_stride()) {
    const std::int64_t i = index / width;
    const std::int64_t d = index % width;
    const std::int64_t first = offsets[i] - offsets[0];
    const std::int64_t end = offsets[i + 1] - offsets[0];
    if (end == first) continue;
    const float gradient = mean_gradients[index] * (1.0f / static_cast<float>(end - first));
    for (std::int64_t t = first; t < end; ++t) atomicAdd(embedding_gradients + buckets[t] * width + d, gradient);
  }
}

__global__ void scale_kernel(float* values, std::int64_t count, float factor) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) values[i] *= factor;
}

__global__ void sgd_kernel(float* parameters, float* gradients, float* velocity, std::int64_t count,
                           float learning_rate, float momentum) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float v = momentum * velocity[i] + gradients[i];
    velocity[i] = v;
    parameters[i] -= learning_rate * v;
    gradients[i] = 0.0f;
  }
}

}  // namespace

void convert_to_float(cudaStream_t stream, const std::byte* in, ElementType type, std::int64_t count, float* out) {
  if (count == 0) return;
  const ElementConversion conversion(type, count, ConversionOptions{ElementType::float32, std::nullopt});
  if (conversion.converts()) {
    launch_element_conversion(stream, conversion, in, 1, nullptr, nullptr, reinterpret_cast<std::byte*>(out));
  } else {
    STRIDER_CUDA_CHECK(
        cudaMemcpyAsync(out, in, static_cast<std::size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream),
        "copying float32 samples");
  }
}

void tokens_to_buckets(cudaStream_t stream, const std::byte* in, ElementType type, std::int64_t count,
                       std::int64_t vocab, std::int64_t* buckets) {
  if (count == 0) return;
  strider::detail::with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      bucket_kernel<T>
          <<<blocks_for(count), threads_per_block, 0, stream>>>(reinterpret_cast<const T*>(in), count, vocab, buckets);
    } else {
      STRIDER_THROW(UsageError, std::string("the bag model needs integer token ids, got ") + element_name(type));
    }
  });
  check_launch("launching the token hashing");
}

void affine_forward(cudaStream_t stream, const float* in, std::int64_t n, std::int64_t rows, const float* weights,
                    const float* bias, std::int64_t cols, bool relu, float* out) {
  if (n == 0) return;
  affine_forward_kernel<<<blocks_for(n * cols), threads_per_block, 0, stream>>>(in, n, rows, weights, bias, cols, relu,
                                                                                out);
  check_launch("launching an affine layer");
}

std::int64_t parameter_gradient_partials(std::int64_t n, std::int64_t rows, std::int64_t cols) {
  const std::int64_t outputs = rows * cols + cols;
  const std::int64_t chunks = gradient_chunks(n, outputs);
  return chunks > 1 ? chunks * outputs : 0;
}

void affine_parameter_gradients(cudaStream_t stream, const float* in, std::int64_t n, std::int64_t rows,
                                const float* out_gradients, std::int64_t cols, float* weight_gradients,
                                float* bias_gradients, float* partials) {
  if (n == 0) return;
  const std::int64_t outputs = rows * cols + cols;
  const std::int64_t chunks = gradient_chunks(n, outputs);
  if (chunks == 1) {
    affine_parameter_gradients_kernel<<<blocks_for(outputs), threads_per_block, 0, stream>>>(
        in, n, rows, out_gradients, cols, weight_gradients, bias_gradients);
    check_launch("launching the weight gradients of an affine layer");
    return;
  }
  affine_parameter_partials_kernel<<<blocks_for(chunks * outputs), threads_per_block, 0, stream>>>(
      in, n, rows, out_gradients, cols, chunks, partials);
  check_launch("launching the partial weight gradients of an affine layer");
  affine_parameter_chunks_kernel<<<blocks_for(outputs), threads_per_block, 0, stream>>>(
      partials, chunks, rows, cols, weight_gradients, bias_gradients);
  check_launch("launching the sum of partial weight gradients");
}

void affine_input_gradients(cudaStream_t stream, const float* weights, std::int64_t n, std::int64_t rows,
                            const float* out_gradients, std::int64_t cols, const float* mask, float* in_gradients) {
  if (n == 0) return;
  affine_input_gradients_kernel<<<blocks_for(n * rows), threads_per_block, 0, stream>>>(weights, n, rows, out_gradients,
                                                                                        cols, mask, in_gradients);
  check_launch("launching the input gradients of an affine layer");
}

void add_bias(cudaStream_t stream, float* out, std::int64_t n, const float* bias, std::int64_t cols, bool relu) {
  if (n == 0) return;
  add_bias_kernel<<<blocks_for(n * cols), threads_per_block, 0, stream>>>(out, n, bias, cols, relu);
  check_launch("launching an affine layer's bias");
}

void mask_relu_gradients(cudaStream_t stream, const float* mask, std::int64_t count, float* gradients) {
  if (count == 0) return;
  mask_relu_gradients_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(mask, count, gradients);
  check_launch("launching the ReLU's gradient mask");
}

void fill(cudaStream_t stream, float* values, std::int64_t count, float value) {
  if (count == 0) return;
  fill_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(values, count, value);
  check_launch("launching a fill");
}

void cross_entropy(cudaStream_t stream, const float* logits, std::int64_t n, int classes, const std::int32_t* labels,
                   double* losses, std::int32_t* correct, float* logit_gradients) {
  if (n == 0) return;
  cross_entropy_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(logits, n, classes, labels, losses, correct,
                                                                        logit_gradients);
  check_launch("launching the cross-entropy");
}

void argmax_rows(cudaStream_t stream, const float* logits, std::int64_t n, int classes, std::int32_t* predictions) {
  if (n == 0) return;
  argmax_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(logits, n, classes, predictions);
  check_launch("launching the argmax");
}

void bag_mean(cudaStream_t stream, const float* embeddings, std::int64_t width, const std::int64_t* buckets,
              const std::int64_t* offsets, std::int64_t n, float* means) {
  if (n == 0) return;
  bag_mean_kernel<<<blocks_for(n * width), threads_per_block, 0, stream>>>(embeddings, width, buckets, offsets, n,
                                                                           means);
  check_launch("launching the mean embedding");
}

void bag_embedding_gradients(cudaStream_t stream, const float* mean_gradients, std::int64_t width,
                             const std::int64_t* buckets, const std::int64_t* offsets, std::int64_t n,
                             float* embedding_gradients) {
  if (n == 0) return;
  bag_embedding_gradients_kernel<<<blocks_for(n * width), threads_per_block, 0, stream>>>(
      mean_gradients, width, buckets, offsets, n, embedding_gradients);
  check_launch("launching the embedding gradients");
}

void scale(cudaStream_t stream, float* values, std::int64_t count, float factor) {
  if (count == 0) return;
  scale_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(values, count, factor);
  check_launch("launching the gradient scaling");
}

void sgd_momentum(cudaStream_t stream, float* parameters, float* gradients, float* velocity, std::int64_t count,
                  float learning_rate, float momentum) {
  if (count == 0) return;
  sgd_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(parameters, gradients, velocity, count, learning_rate,
                                                                  momentum);
  check_launch("launching the SGD update");
}

cudaError_t kernel_image_status() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, affine_forward_kernel);
}

void limit_blocks_for_testing(std::int64_t blocks) {
  block_limit = blocks > 0 ? blocks : default_block_limit;
}

}  // namespace strider::detail::kernels
