#pragma once
// make_sampler's part for the class-aware modes (balanced, weighted, stratified).

#include <memory>
#include <string>
#include <vector>

#include "strider/sampling/factory.hpp"

namespace strider::detail {

/// The class-aware modes, in the order the CLI lists them.
std::vector<std::string> class_aware_modes();

/// Rank `rank` of `world_size`'s sampler when options.mode is a class-aware mode, else null.
/// Throws UsageError for missing labels, labels not matching the dataset size, or bad options.
std::unique_ptr<Sampler> make_class_aware_sampler(const SamplerOptions& options, int world_size, int rank);

}  // namespace strider::detail
