#pragma once
/// \file
/// Agreeing on the run's seed.

#include <cstdint>
#include <optional>

#include "strider/comm/communicator.hpp"

namespace strider {

/// Collective over comm: every rank must call. Rank 0's seed (the given one, or one drawn from
/// std::random_device and logged so the run can be repeated with --seed) reaches every rank through
/// MPI_Bcast; the seeds other ranks pass are ignored. Returns the agreed seed.
std::int64_t agree_on_seed(const Communicator& comm, std::optional<std::int64_t> seed);

/// A seed drawn from std::random_device (64 bits).
std::int64_t draw_random_seed();

}  // namespace strider
