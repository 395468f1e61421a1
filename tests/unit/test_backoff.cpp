// The waits of small collectives: how long they yield before they sleep, per thread and scope.
#include <catch2/catch.hpp>
#include <thread>

#include "comm/backoff.hpp"

namespace strider {

TEST_CASE("yielding waits: a scope sets its thread's yield before sleeping and restores the outer one", "[comm]") {
  REQUIRE(detail::collective_yield_us() == 0);  // outside any scope, waits sleep after a few yields
  {
    const detail::YieldingWaits outer(detail::kCollectiveYieldUs);
    REQUIRE(detail::collective_yield_us() == detail::kCollectiveYieldUs);
    {
      const detail::YieldingWaits inner(5);  // nests: the innermost wins
      REQUIRE(detail::collective_yield_us() == 5);
    }
    REQUIRE(detail::collective_yield_us() == detail::kCollectiveYieldUs);
    int elsewhere = -1;  // another thread's waits are its own
    std::thread([&] { elsewhere = detail::collective_yield_us(); }).join();
    REQUIRE(elsewhere == 0);
  }
  REQUIRE(detail::collective_yield_us() == 0);
}

}  // namespace strider
