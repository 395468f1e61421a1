#include "device/batch_checks.hpp"

#include <string>

#include "strider/core/error.hpp"

namespace strider::detail {

void check_feature_batch(const BatchInput& input, std::int64_t features) {
  STRIDER_REQUIRE(
      input.offsets == nullptr && input.features == features,
      "the model expects fixed-size samples of " + std::to_string(features) + " features, got " +
          (input.offsets != nullptr ? std::string("token sequences") : std::to_string(input.features) + " features"));
  STRIDER_REQUIRE(input.count >= 0, "negative batch size " + std::to_string(input.count));
  STRIDER_REQUIRE(input.count == 0 || input.samples != nullptr, "a batch of samples without data");
}

void check_token_batch(const BatchInput& input) {
  STRIDER_REQUIRE(input.count >= 0, "negative batch size " + std::to_string(input.count));
  STRIDER_REQUIRE(input.offsets != nullptr, "the bag model needs token sequences (offsets), got fixed-size samples");
  STRIDER_REQUIRE(element_is_integer(input.type),
                  std::string("the bag model needs integer token ids, got ") + element_name(input.type));
  for (std::int64_t i = 0; i < input.count; ++i) {
    if (input.offsets[i + 1] < input.offsets[i]) {
      STRIDER_THROW(DataError, "token offsets decrease at batch row " + std::to_string(i) + " (" +
                                   std::to_string(input.offsets[i]) + " then " + std::to_string(input.offsets[i + 1]) +
                                   ")");
    }
  }
  STRIDER_REQUIRE(input.count == 0 || input.offsets[input.count] == input.offsets[0] || input.samples != nullptr,
                  "a batch of tokens without data");
}

}  // namespace strider::detail
