#pragma once
// Shared by the MPI tests: the world communicator the custom main creates, and checks that every
// rank agrees on.
// Tests must stay collective-safe. A REQUIRE that fails on one rank only ends the test case on that
// rank, and the others wait in their next collective until the ctest timeout. So a check of a value
// that is local to a rank uses REQUIRE_ON_ALL_RANKS: every rank evaluates its condition, the ranks
// agree on the results (all-reduce), and when any rank failed, every rank fails the check together,
// naming the lowest failing rank with its expression and values. A plain REQUIRE is right only for
// a value every rank already holds alike (the result of an all-reduce or all-gather). Wrap local
// work that can throw between collectives in world().collective_try.

#include <catch2/catch.hpp>
#include <exception>
#include <sstream>
#include <string>

#include "strider/comm/communicator.hpp"

namespace strider::testing {

/// The duplicate of MPI_COMM_WORLD made by the test main.
const Communicator& world();

/// True in a sanitizer build (tests/CMakeLists.txt defines STRIDER_TEST_SANITIZED): bounds on time
/// are not checked there, the work they time still runs.
#ifdef STRIDER_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// One rank's result of a check: whether it held, and the condition with its values (as Catch2
/// prints an expansion, e.g. `3 == 4`).
struct CheckOutcome {
  bool passed = false;
  std::string expansion;
};

/// The outcome of a decomposed Catch2 expression (`Catch::Decomposer() <= a == b`).
inline CheckOutcome check_outcome(const Catch::ITransientExpression& expression) {
  std::ostringstream text;
  expression.streamReconstructedExpression(text);
  return CheckOutcome{expression.getResult(), text.str()};
}
template <typename T>
CheckOutcome check_outcome(const Catch::ExprLhs<T>& expression) {
  return check_outcome(expression.makeUnaryExpr());
}

/// Collective over world(): every rank must call, in the same order. Returns "" when `outcome`
/// passed on every rank; otherwise, on every rank, one line naming how many ranks failed and the
/// lowest failing rank's expression, expansion and source location.
inline std::string agree_on_check(const CheckOutcome& outcome, const char* expression, const char* file, int line) {
  const Communicator& comm = world();
  const int failed_ranks = comm.all_reduce(outcome.passed ? 0 : 1, ReduceOp::sum);
  if (failed_ranks == 0) return "";
  const int lowest = comm.all_reduce(outcome.passed ? comm.size() : comm.rank(), ReduceOp::min);
  std::string failure;
  if (comm.rank() == lowest) {
    std::ostringstream text;
    text << "rank " << lowest << ": REQUIRE_ON_ALL_RANKS( " << expression << " ) with expansion " << outcome.expansion
         << " (" << file << ":" << line << ")";
    failure = text.str();
  }
  comm.broadcast(failure, lowest);
  return std::to_string(failed_ranks) + " of " + std::to_string(comm.size()) + " ranks failed; " + failure;
}

}  // namespace strider::testing

/// Collective over world(): REQUIRE(condition) agreed across ranks (see the top of this file). The
/// condition is evaluated once on each rank; an exception it throws counts as a failure.
#define REQUIRE_ON_ALL_RANKS(...)                                                               \
  do {                                                                                          \
    ::strider::testing::CheckOutcome strider_outcome_;                                          \
    try {                                                                                       \
      CATCH_INTERNAL_START_WARNINGS_SUPPRESSION                                                 \
      CATCH_INTERNAL_SUPPRESS_PARENTHESES_WARNINGS                                              \
      strider_outcome_ = ::strider::testing::check_outcome(Catch::Decomposer() <= __VA_ARGS__); \
      CATCH_INTERNAL_STOP_WARNINGS_SUPPRESSION                                                  \
    } catch (const std::exception& strider_error_) {                                            \
      strider_outcome_.expansion = std::string("(threw: ") + strider_error_.what() + ")";       \
    } catch (...) {                                                                             \
      strider_outcome_.expansion = "(threw an exception that is not a std::exception)";         \
    }                                                                                           \
    const std::string strider_failure_ =                                                        \
        ::strider::testing::agree_on_check(strider_outcome_, #__VA_ARGS__, __FILE__, __LINE__); \
    if (!strider_failure_.empty()) FAIL(strider_failure_);                                      \
    SUCCEED(#__VA_ARGS__);                                                                      \
  } while (false)
