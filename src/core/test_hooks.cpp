#include "core/test_hooks.hpp"

#include <cstdio>
#include <cstdlib>

#include "strider/core/error.hpp"

namespace strider::detail {
namespace {

/// The STEP of a "RANK:STEP" variable when RANK is this process's world rank, else -1.
std::int64_t step_for_this_rank(const char* name) noexcept {
  const char* text = std::getenv(name);
  int rank = -1;
  long long step = -1;
  if (text == nullptr || std::sscanf(text, "%d:%lld", &rank, &step) != 2 || rank != current_world_rank()) return -1;
  return step;
}

std::int64_t number(const char* name, std::int64_t unset) noexcept {
  const char* text = std::getenv(name);
  long long value = 0;
  if (text == nullptr || std::sscanf(text, "%lld", &value) != 1) return unset;
  return value;
}

}  // namespace

TestHooks test_hooks() noexcept {
  TestHooks hooks;
  hooks.fail_read_step = step_for_this_rank("STRIDER_TEST_FAIL_READ");
  hooks.fail_load_piece = step_for_this_rank("STRIDER_TEST_FAIL_LOAD");
  hooks.fail_write_piece = step_for_this_rank("STRIDER_TEST_FAIL_WRITE");
  hooks.hang_step = step_for_this_rank("STRIDER_TEST_HANG_AT");
  hooks.step_delay_us = number("STRIDER_TEST_STEP_DELAY_US", 0);
  hooks.read_delay_us = number("STRIDER_TEST_READ_DELAY_US", 0);
  hooks.kill_in_checkpoint = number("STRIDER_TEST_KILL_IN_CHECKPOINT", -1);
  return hooks;
}

}  // namespace strider::detail
