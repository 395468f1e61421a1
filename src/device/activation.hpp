#pragma once
// The mlp's ReLU, one definition for the CPU models and the CUDA kernels (host and device), so that
// both backends treat NaN alike: a NaN pre-activation stays NaN (as std::max(x, 0.0f) does, and
// unlike fmaxf(x, 0.0f), which turns it into 0), and its gradient passes. A diverging run then shows
// a NaN loss on either backend instead of looking healthy on one of them.

#if defined(__CUDACC__)
#define STRIDER_HOST_DEVICE __host__ __device__
#else
#define STRIDER_HOST_DEVICE
#endif

namespace strider::detail {

/// max(x, 0) for numbers; NaN stays NaN.
STRIDER_HOST_DEVICE inline float relu(float x) {
  return x < 0.0f ? 0.0f : x;
}

/// Whether the gradient flows back through a unit whose ReLU output is `activation`: not where the
/// unit was off (output <= 0); a NaN output passes it on.
STRIDER_HOST_DEVICE inline bool relu_passes_gradient(float activation) {
  return !(activation <= 0.0f);
}

}  // namespace strider::detail
