// The hdf5 engine's thread rule (io/owner_thread.hpp): the first thread to check owns the reader,
// the owner may check again, any other thread is refused with a line naming the file.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "io/owner_thread.hpp"
#include "strider/core/error.hpp"

using strider::io_detail::OwnerThread;

TEST_CASE("owner thread: the first reader owns it, another thread is refused", "[owner_thread]") {
  OwnerThread owner;
  bool io_thread_ok = false;
  std::thread io_thread([&] {
    owner.check("data.h5");
    owner.check("data.h5");
    io_thread_ok = true;
  });
  io_thread.join();
  REQUIRE(io_thread_ok);
  try {
    owner.check("data.h5");
    FAIL("a second thread was let through");
  } catch (const strider::UsageError& error) {
    REQUIRE_THAT(error.reason(), Catch::Contains("the hdf5 engine reading data.h5 was called from a second thread") &&
                                     Catch::Contains("not thread-safe"));
  }
}

TEST_CASE("owner thread: two threads racing for a fresh reader: exactly one wins", "[owner_thread]") {
  for (int round = 0; round < 50; ++round) {
    OwnerThread owner;
    std::atomic<int> refused{0}, checked{0};
    const auto racer = [&] {
      try {
        owner.check("x.h5");
      } catch (const strider::UsageError&) {
        ++refused;
      }
      // Both stay alive until both checked: a finished thread's id may be given to the next one.
      ++checked;
      while (checked.load() < 2) std::this_thread::yield();
    };
    std::thread first(racer), second(racer);
    first.join();
    second.join();
    REQUIRE(refused.load() == 1);
  }
}
