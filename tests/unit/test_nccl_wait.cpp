// The CUDA backend's NCCL waits (device/nccl_wait.hpp) with NCCL and the clock stood in: an
// operation that completes is never aborted; an error, a poll that throws, or no progress for the
// timeout aborts the communicator exactly once and throws; a timeout of 0 never gives up.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "device/nccl_wait.hpp"
#include "strider/core/error.hpp"

using strider::NcclError;
using strider::detail::NcclPoll;
using strider::detail::NcclWaitHooks;
using strider::detail::wait_for_nccl_operation;

namespace {

/// A stand-in NCCL operation: `states` are what successive polls report (the last one repeats); the
/// clock advances `step_s` per pause.
struct FakeOperation {
  std::vector<NcclPoll::State> states;
  double step_s = 1.0;
  double clock_s = 100.0;
  int polls = 0, pauses = 0, aborts = 0;
  bool poll_throws_at_end = false;

  NcclWaitHooks hooks() {
    NcclWaitHooks hooks;
    hooks.poll = [this] {
      const std::size_t at = std::min(static_cast<std::size_t>(polls), states.size() - 1);
      ++polls;
      if (poll_throws_at_end && at == states.size() - 1) STRIDER_THROW(strider::Error, "cudaStreamQuery: illegal");
      NcclPoll poll;
      poll.state = states[at];
      if (poll.state == NcclPoll::State::failed) {
        poll.code = 6;
        poll.error = "remote process exited or there was a network error";
      }
      return poll;
    };
    hooks.now_s = [this] { return clock_s; };
    hooks.pause = [this] {
      ++pauses;
      clock_s += step_s;
    };
    hooks.abort = [this] { ++aborts; };
    return hooks;
  }
};

using State = NcclPoll::State;

}  // namespace

TEST_CASE("nccl wait: an operation that completes returns without an abort", "[nccl_wait]") {
  FakeOperation operation{{State::running, State::running, State::done}};
  wait_for_nccl_operation(operation.hooks(), 10.0, "the gradient all-reduce");
  REQUIRE(operation.polls == 3);
  REQUIRE(operation.pauses == 2);
  REQUIRE(operation.aborts == 0);
}

TEST_CASE("nccl wait: an asynchronous error aborts once and throws NcclError with NCCL's reason", "[nccl_wait]") {
  FakeOperation operation{{State::running, State::failed}};
  try {
    wait_for_nccl_operation(operation.hooks(), 600.0, "the gradient all-reduce");
    FAIL("no error");
  } catch (const NcclError& error) {
    REQUIRE(error.context().code == 6);
    REQUIRE_THAT(error.reason(), Catch::Contains("the gradient all-reduce") &&
                                     Catch::Contains("remote process exited or there was a network error") &&
                                     Catch::Contains("aborted"));
  }
  REQUIRE(operation.polls == 2);
  REQUIRE(operation.aborts == 1);
}

TEST_CASE("nccl wait: no progress for the timeout aborts once and throws, not before", "[nccl_wait]") {
  // A clock that advances 1 s per pause and a 5 s timeout: polls at 0, 1, ..., 5 s are within it;
  // the poll after the 6th pause sees 6 s > 5 s.
  FakeOperation operation{{State::running}};
  try {
    wait_for_nccl_operation(operation.hooks(), 5.0, "creating the NCCL communicator");
    FAIL("no timeout");
  } catch (const NcclError& error) {
    REQUIRE_THAT(error.reason(), Catch::Contains("creating the NCCL communicator made no progress for 6 s") &&
                                     Catch::Contains("STRIDER_NCCL_TIMEOUT_S=5") && Catch::Contains("aborted"));
  }
  REQUIRE(operation.polls == 7);
  REQUIRE(operation.pauses == 6);
  REQUIRE(operation.aborts == 1);
  REQUIRE(operation.clock_s == 106.0);
}

TEST_CASE("nccl wait: a timeout of 0 never gives up", "[nccl_wait]") {
  std::vector<State> states(5000, State::running);
  states.push_back(State::done);
  FakeOperation operation{states, 1000.0};  // 5000 polls, 5e6 s on the clock
  wait_for_nccl_operation(operation.hooks(), 0.0, "the gradient all-reduce");
  REQUIRE(operation.polls == 5001);
  REQUIRE(operation.aborts == 0);
}

TEST_CASE("nccl wait: a poll that throws (a CUDA error) aborts and passes the error on", "[nccl_wait]") {
  FakeOperation operation{{State::running, State::running}};
  operation.poll_throws_at_end = true;
  try {
    wait_for_nccl_operation(operation.hooks(), 5.0, "the gradient all-reduce");
    FAIL("no error");
  } catch (const NcclError&) {
    FAIL("the poll's own error was replaced");
  } catch (const strider::Error& error) {
    REQUIRE_THAT(error.reason(), Catch::Contains("cudaStreamQuery: illegal"));
  }
  REQUIRE(operation.aborts == 1);
}

namespace {

/// FakeOperation with the MPI side stood in too: `peer_after_polls` polls in, a peer's failure
/// arrives; every tell_peers and abort is recorded in order.
struct FakeGroup {
  FakeOperation operation;
  int peer_after_polls = -1;  // -1: no peer fails
  std::vector<std::string> events;

  NcclWaitHooks hooks() {
    NcclWaitHooks hooks = operation.hooks();
    hooks.abort = [this] {
      ++operation.aborts;
      events.push_back("abort");
    };
    hooks.peer_failure = [this]() -> std::string {
      if (peer_after_polls >= 0 && operation.polls >= peer_after_polls)
        return "rank 1: NCCL error: unhandled cuda error";
      return "";
    };
    hooks.tell_peers = [this](const std::string& reason) { events.push_back("tell: " + reason); };
    return hooks;
  }
};

}  // namespace

TEST_CASE("nccl wait: a peer's failure over MPI ends the wait at once, aborts, and names the peer", "[nccl_wait]") {
  // The operation never finishes here (its peer is gone) and the timeout is 10 minutes: only the
  // peer's notice can end the wait, after the third poll.
  FakeGroup group{FakeOperation{{State::running}}, 3, {}};
  try {
    wait_for_nccl_operation(group.hooks(), 600.0, "creating the NCCL communicator");
    FAIL("no error");
  } catch (const NcclError& error) {
    REQUIRE_THAT(error.reason(), Catch::Contains("creating the NCCL communicator") &&
                                     Catch::Contains("rank 1: NCCL error: unhandled cuda error") &&
                                     Catch::Contains("aborted"));
    REQUIRE_THAT(error.reason(), !Catch::Contains("no progress"));
  }
  REQUIRE(group.operation.polls == 3);
  REQUIRE(group.operation.clock_s == 102.0);  // two pauses of 1 s, far from the 600 s timeout
  // The peer already knows: nothing is told back, the communicator is aborted once.
  REQUIRE(group.events == std::vector<std::string>{"abort"});
}

TEST_CASE("nccl wait: a local failure tells the peers first, then aborts", "[nccl_wait]") {
  SECTION("an asynchronous NCCL error") {
    FakeGroup group{FakeOperation{{State::running, State::failed}}, -1, {}};
    REQUIRE_THROWS_AS(wait_for_nccl_operation(group.hooks(), 600.0, "the gradient all-reduce"), NcclError);
    REQUIRE(group.events.size() == 2);
    REQUIRE_THAT(group.events[0], Catch::StartsWith("tell: the gradient all-reduce: remote process exited"));
    REQUIRE(group.events[1] == "abort");
  }
  SECTION("a timeout") {
    FakeGroup group{FakeOperation{{State::running}}, -1, {}};
    REQUIRE_THROWS_AS(wait_for_nccl_operation(group.hooks(), 5.0, "the gradient all-reduce"), NcclError);
    REQUIRE(group.events.size() == 2);
    REQUIRE_THAT(group.events[0], Catch::StartsWith("tell: the gradient all-reduce made no progress for 6 s"));
    REQUIRE(group.events[1] == "abort");
  }
  SECTION("a poll that throws") {
    FakeGroup group{FakeOperation{{State::running, State::running}}, -1, {}};
    group.operation.poll_throws_at_end = true;
    REQUIRE_THROWS_AS(wait_for_nccl_operation(group.hooks(), 5.0, "the gradient all-reduce"), strider::Error);
    REQUIRE(group.events.size() == 2);
    REQUIRE_THAT(group.events[0],
                 Catch::StartsWith("tell: the gradient all-reduce: ") && Catch::Contains("cudaStreamQuery: illegal"));
    REQUIRE(group.events[1] == "abort");
  }
  SECTION("success tells nobody") {
    FakeGroup group{FakeOperation{{State::running, State::done}}, -1, {}};
    wait_for_nccl_operation(group.hooks(), 5.0, "the gradient all-reduce");
    REQUIRE(group.events.empty());
  }
}
