// Failure notices between ranks (comm/failure_notices.hpp) and the NCCL wait built on them, with NCCL
// stood in, at 1..4 ranks: when one rank's operation fails, every other rank, still waiting on an
// operation that can never finish, stops with that rank's reason instead of waiting for the
// timeout. Collective-safe: each rank records its outcome, the ranks agree, then every rank asserts.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "comm/failure_notices.hpp"
#include "device/nccl_wait.hpp"
#include "mpi_test_support.hpp"
#include "strider/core/error.hpp"

using namespace strider;
using strider::detail::FailureNotices;
using strider::detail::NcclPoll;
using strider::detail::NcclWaitHooks;
using strider::testing::world;

namespace {

bool on_all_ranks(bool local) {
  return world().all_reduce(local ? 1 : 0, ReduceOp::min) == 1;
}

/// Hooks of a wait whose NCCL side is stood in: `fails` makes the first poll report an error,
/// otherwise the operation runs forever. The clock is real and the timeout long, so that only a
/// notice can end the wait of a rank whose operation never fails.
NcclWaitHooks stood_in_hooks(FailureNotices& notices, bool fails, int& aborts) {
  NcclWaitHooks hooks;
  hooks.poll = [fails] {
    NcclPoll poll;
    poll.state = fails ? NcclPoll::State::failed : NcclPoll::State::running;
    if (fails) {
      poll.code = 5;
      poll.error = "invalid usage (stood in)";
    }
    return poll;
  };
  hooks.now_s = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  hooks.pause = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
  hooks.abort = [&aborts] { ++aborts; };
  hooks.peer_failure = [&notices]() -> std::string {
    const auto notice = notices.poll();
    return notice ? "rank " + std::to_string(notice->rank) + ": " + notice->reason : "";
  };
  hooks.tell_peers = [&notices](const std::string& reason) { notices.notify(reason); };
  return hooks;
}

}  // namespace

TEST_CASE("failure notices: one rank's failure stops every other rank's wait with its reason", "[failure-notices]") {
  const Communicator& comm = world();
  const int failing = comm.size() - 1;  // the last rank fails (rank 0 alone at 1 rank)
  std::string message;
  int aborts = 0;
  bool notified_as_expected = false;
  {
    FailureNotices notices(comm);
    try {
      detail::wait_for_nccl_operation(stood_in_hooks(notices, comm.rank() == failing, aborts), 50.0,
                                      "the stood-in all-reduce");
    } catch (const NcclError& error) {
      message = error.reason();
    } catch (const std::exception& error) {  // any other failure still reaches the agreement below
      message = std::string("unexpected exception: ") + error.what();
    }
    notified_as_expected = notices.notified() == (comm.rank() == failing);
  }
  CHECK(on_all_ranks(notified_as_expected));
  INFO("rank " << comm.rank() << ": " << message);
  const bool own_failure =
      message.find("invalid usage (stood in)") != std::string::npos && message.find("aborted") != std::string::npos;
  const bool peer_failure = message.find("rank " + std::to_string(failing) +
                                         ": the stood-in all-reduce: invalid usage (stood in)") != std::string::npos &&
                            message.find("no progress") == std::string::npos;
  CHECK(on_all_ranks(comm.rank() == failing ? own_failure : peer_failure));
  CHECK(on_all_ranks(aborts == 1));
}

TEST_CASE("failure notices: nothing is received when nobody fails; two failing ranks leave no hang",
          "[failure-notices]") {
  const Communicator& comm = world();
  {
    FailureNotices notices(comm);
    comm.barrier();
    CHECK(on_all_ranks(!notices.poll().has_value()));
  }
  // Ranks 0 and 1 both notify: every rank hears from at least one of them (rank 0 and 1 from each
  // other), and the extra notice left unreceived is dropped with the private communicator.
  bool heard = true;
  {
    FailureNotices notices(comm);
    if (comm.rank() <= 1) notices.notify("rank " + std::to_string(comm.rank()) + " gave up");
    if (comm.size() > 1) {
      std::optional<detail::FailureNotice> notice;
      for (int polls = 0; polls < 600000 && !notice; ++polls) {
        notice = notices.poll();
        if (!notice) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      heard = notice.has_value() && notice->rank <= 1 && notice->rank != comm.rank() &&
              notice->reason == "rank " + std::to_string(notice->rank) + " gave up";
    }
  }
  CHECK(on_all_ranks(heard));
}
