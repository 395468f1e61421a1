#pragma once
// An environment variable set (or unset) for a scope, for the tests of settings read from the
// environment (unit, MPI and GPU tests).

#include <cstdlib>
#include <optional>
#include <string>

namespace strider::testing {

/// Sets (or, for nullptr, unsets) an environment variable for its lifetime, then restores it.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedVariable() {
    if (saved_)
      ::setenv(name_, saved_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

}  // namespace strider::testing
