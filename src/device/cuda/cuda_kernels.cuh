#pragma once
// Launchers of the CUDA backend's fp32 kernels (private). Each enqueues on `stream` and checks the
// launch (cudaGetLastError); none synchronizes. Shapes follow the CPU models
// (src/device/cpu/cpu_models.cpp): row-major matrices, one sample per row, sums over the input
// dimension in index order.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device/cuda/kernel_limits.hpp"
#include "strider/core/element_type.hpp"

namespace strider::detail::kernels {

/// cudaSuccess when the current device can run this build's kernels; cudaErrorNoKernelImageForDevice
/// (or cudaErrorInvalidDeviceFunction) when the build has no image for its compute capability.
/// Launches nothing.
cudaError_t kernel_image_status();

/// out[i] = float(element i of `type` at `in`), i < count: the element conversion to float32
/// (launch_element_conversion; float32 is copied). `in` is aligned to its element size.
void convert_to_float(cudaStream_t stream, const std::byte* in, ElementType type, std::int64_t count, float* out);

/// Integer token ids -> embedding rows (id mod vocab, non-negative): the hashing trick.
void tokens_to_buckets(cudaStream_t stream, const std::byte* in, ElementType type, std::int64_t count,
                       std::int64_t vocab, std::int64_t* buckets);

/// out[n, cols] = in[n, rows] * weights[rows, cols] + bias[cols]; relu clamps at 0 (NaN stays NaN).
void affine_forward(cudaStream_t stream, const float* in, std::int64_t n, std::int64_t rows, const float* weights,
                    const float* bias, std::int64_t cols, bool relu, float* out);

/// Floats of scratch that affine_parameter_gradients needs for its partial sums (0 when the layer
/// has enough outputs to use one pass). Reserve it before enqueueing.
std::int64_t parameter_gradient_partials(std::int64_t n, std::int64_t rows, std::int64_t cols);

/// weight_gradients[rows, cols] += in^T * out_gradients; bias_gradients[cols] += column sums. A
/// layer with few outputs (rows * cols + cols) splits the batch into chunks: `partials` holds
/// parameter_gradient_partials(n, rows, cols) floats (may be null when that is 0).
void affine_parameter_gradients(cudaStream_t stream, const float* in, std::int64_t n, std::int64_t rows,
                                const float* out_gradients, std::int64_t cols, float* weight_gradients,
                                float* bias_gradients, float* partials);

/// in_gradients[n, rows] = out_gradients[n, cols] * weights^T; where `mask` (the ReLU output) is
/// not null, entries whose mask value is <= 0 become 0 (a NaN mask value passes).
void affine_input_gradients(cudaStream_t stream, const float* weights, std::int64_t n, std::int64_t rows,
                            const float* out_gradients, std::int64_t cols, const float* mask, float* in_gradients);

/// out[n, cols] += bias[cols] on every row, then relu clamps at 0 (NaN stays NaN) when asked: the
/// epilogue of an affine layer whose product another routine made (cuBLAS).
void add_bias(cudaStream_t stream, float* out, std::int64_t n, const float* bias, std::int64_t cols, bool relu);

/// gradients[i] = 0 where mask[i] (the ReLU output) is <= 0, i < count; a NaN mask value passes.
void mask_relu_gradients(cudaStream_t stream, const float* mask, std::int64_t count, float* gradients);

/// values[i] = value, i < count.
void fill(cudaStream_t stream, float* values, std::int64_t count, float value);

/// Per row: loss (double), 1 when the argmax (lowest index on ties) equals the label, and
/// d loss / d logits = softmax - one_hot.
void cross_entropy(cudaStream_t stream, const float* logits, std::int64_t n, int classes, const std::int32_t* labels,
                   double* losses, std::int32_t* correct, float* logit_gradients);

/// predictions[i] = argmax of row i (lowest index on ties).
void argmax_rows(cudaStream_t stream, const float* logits, std::int64_t n, int classes, std::int32_t* predictions);

/// means[n, width]: the mean embedding of each row's tokens (zero for an empty row). Row i holds
/// buckets [offsets[i] - offsets[0], offsets[i+1] - offsets[0]).
void bag_mean(cudaStream_t stream, const float* embeddings, std::int64_t width, const std::int64_t* buckets,
              const std::int64_t* offsets, std::int64_t n, float* means);

/// embedding_gradients[bucket, :] += mean_gradients[i, :] / length(i) for every token of row i.
void bag_embedding_gradients(cudaStream_t stream, const float* mean_gradients, std::int64_t width,
                             const std::int64_t* buckets, const std::int64_t* offsets, std::int64_t n,
                             float* embedding_gradients);

/// values[i] *= factor.
void scale(cudaStream_t stream, float* values, std::int64_t count, float factor);

/// velocity = momentum * velocity + gradient; parameter -= learning_rate * velocity; gradient = 0.
void sgd_momentum(cudaStream_t stream, float* parameters, float* gradients, float* velocity, std::int64_t count,
                  float learning_rate, float momentum);

}  // namespace strider::detail::kernels
