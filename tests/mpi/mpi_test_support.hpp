#pragma once
// Shared by the MPI tests: the world communicator the custom main creates.
// Tests must stay collective-safe: compute locally, agree (all-reduce) on the result, then assert on
// every rank, so that a failure on one rank cannot leave the others blocked in a collective.

#include "strider/comm/communicator.hpp"

namespace strider::testing {
/// The duplicate of MPI_COMM_WORLD made by the test main.
const Communicator& world();
}  // namespace strider::testing
