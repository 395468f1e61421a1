#pragma once
// Range checks of LoaderOptions values, shared by the option table's setters (at parse time) and the
// Loader (for options set in code), so that both refuse with the same words.

#include <cstdint>
#include <string_view>

namespace strider::detail {

/// Throws UsageError "--prefetch must be in 0..64 (0: auto), got N" outside 0..kMaxPrefetchDepth.
void check_prefetch_option(std::int64_t depth);

/// Throws UsageError "--name must be >= minimum, got N" for value < minimum.
void check_option_at_least(std::string_view name, std::int64_t value, std::int64_t minimum);

}  // namespace strider::detail
