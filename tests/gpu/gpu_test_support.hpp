#pragma once
// Shared by the GPU tests and the GPU benchmark: batches in pinned host memory (any element type,
// fixed-size samples or token sequences) and comparisons of float vectors.

#include <cstdint>
#include <iosfwd>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/device/pinned_allocator.hpp"
#include "strider/train/batch_input.hpp"

namespace strider::gpu_testing {

/// The duplicate of MPI_COMM_WORLD made by the test main (tests only).
const Communicator& world();

/// A batch whose samples, labels and offsets live in pinned host memory; `input` views them.
struct PinnedBatch {
  HostBuffer samples;
  HostBuffer labels;
  HostBuffer offsets;
  BatchInput input;
};

/// count samples of `features` elements of `type`; class c is shifted up on feature c % features.
PinnedBatch make_feature_batch(std::int64_t count, std::int64_t features, ElementType type, int classes,
                               std::uint64_t seed);

/// count token rows of 0..max_tokens tokens of an integer `type` (empty rows included; negative ids for
/// signed types and ids above `vocab` so that hashing is exercised); offsets start at `first_offset`.
PinnedBatch make_token_batch(std::int64_t count, ElementType type, int classes, std::int64_t vocab,
                             std::int64_t max_tokens, std::int64_t first_offset, std::uint64_t seed);

/// How far a CUDA result is from the CPU's, element by element.
struct ElementwiseComparison {
  std::int64_t outside = 0;  ///< elements with |cuda - cpu| > relative * |cpu| + absolute (all, when sizes differ)
  std::int64_t worst = -1;   ///< the element farthest outside its bound (-1: none)
  double cuda = 0.0, cpu = 0.0, bound = 0.0;  ///< that element's values and bound
};

/// Compares per element: each value must lie within relative * |cpu[i]| + absolute of the CPU's,
/// so that a small entry cannot drift under a bound set by the largest one. NaN must meet NaN.
ElementwiseComparison compare_per_element(const std::vector<float>& cuda, const std::vector<float>& cpu,
                                          double relative, double absolute);

/// Largest |a[i] - b[i]| (infinity when the sizes differ).
double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b);
/// Largest |a[i]| (NaN ignored).
double max_abs(const std::vector<float>& a);

std::ostream& operator<<(std::ostream& out, const ElementwiseComparison& comparison);

}  // namespace strider::gpu_testing
