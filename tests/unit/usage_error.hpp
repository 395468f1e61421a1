#pragma once
// The line of the UsageError a piece of code throws, for tests of option and input checks.

#include <functional>
#include <string>

#include "strider/core/error.hpp"

namespace strider::testing {

/// The message of the UsageError that body throws ("" when it throws none; other errors escape).
inline std::string usage_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UsageError& error) {
    return error.reason();
  }
  return "";
}

}  // namespace strider::testing
