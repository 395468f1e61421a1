// Communicator, seed agreement, failure agreement and plan consensus at 1..4 ranks. Checks of local
// values agree across ranks (REQUIRE_ON_ALL_RANKS), so no rank is left in a collective.
#include <time.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "mpi_test_support.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/comm/seed.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/distributed_sampler.hpp"

using namespace strider;
using strider::testing::world;

TEST_CASE("the communicator is a duplicate with MPI_ERRORS_RETURN and knows its node", "[mpi][comm]") {
  const Communicator& comm = world();
  int world_rank = -1, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  REQUIRE_ON_ALL_RANKS(comm.rank() == world_rank);
  REQUIRE_ON_ALL_RANKS(comm.size() == world_size);
  int compare = 0;
  MPI_Comm_compare(comm.native(), MPI_COMM_WORLD, &compare);
  REQUIRE_ON_ALL_RANKS(compare == MPI_CONGRUENT);
  MPI_Errhandler handler;
  MPI_Comm_get_errhandler(comm.native(), &handler);
  const bool errors_return = handler == MPI_ERRORS_RETURN;
  MPI_Errhandler_free(&handler);
  REQUIRE_ON_ALL_RANKS(errors_return);
  // One node here: local ranks are the ranks.
  REQUIRE_ON_ALL_RANKS(comm.local_size() == comm.size());
  REQUIRE_ON_ALL_RANKS(comm.local_rank() == comm.rank());

  // MPI errors become MpiError instead of aborting: an invalid root.
  int value = 1;
  bool threw = false;
  try {
    comm.broadcast(&value, 1, comm.size() + 5);
  } catch (const MpiError&) {
    threw = true;
  }
  REQUIRE_ON_ALL_RANKS(threw);
}

TEST_CASE("collectives: broadcast, all-reduce, all-gather", "[mpi][comm]") {
  const Communicator& comm = world();
  std::string text = comm.is_root() ? "hello from rank 0" : "";
  comm.broadcast(text);
  REQUIRE_ON_ALL_RANKS(text == "hello from rank 0");
  std::vector<std::int64_t> values = comm.is_root() ? std::vector<std::int64_t>{1, 2, 3} : std::vector<std::int64_t>{};
  comm.broadcast(values);
  REQUIRE_ON_ALL_RANKS(values == std::vector<std::int64_t>{1, 2, 3});
  const std::int64_t rank_sum = comm.all_reduce(std::int64_t{comm.rank()}, ReduceOp::sum);
  REQUIRE_ON_ALL_RANKS(rank_sum == std::int64_t{comm.size()} * (comm.size() - 1) / 2);
  const int rank_max = comm.all_reduce(comm.rank(), ReduceOp::max);
  REQUIRE_ON_ALL_RANKS(rank_max == comm.size() - 1);
  // Every rank holds another value, so that min and max cannot stand in for each other.
  const double minimum = comm.all_reduce(2.5 + comm.rank(), ReduceOp::min);
  REQUIRE_ON_ALL_RANKS(minimum == 2.5);
  std::int64_t pair[2] = {10 - comm.rank(), comm.rank()};
  comm.all_reduce(pair, 2, ReduceOp::min);
  REQUIRE_ON_ALL_RANKS((pair[0] == 10 - (comm.size() - 1) && pair[1] == 0));
  const auto ranks = comm.all_gather(comm.rank());
  std::vector<int> expected_ranks(static_cast<std::size_t>(comm.size()));
  for (int rank = 0; rank < comm.size(); ++rank) expected_ranks[static_cast<std::size_t>(rank)] = rank;
  REQUIRE_ON_ALL_RANKS(ranks == expected_ranks);
}

TEST_CASE("all-reduces small and large give the same sums", "[mpi][comm]") {
  // Small ones wait by napping (MPI_Iallreduce), large ones by MPI_Allreduce: both must reduce.
  const Communicator& comm = world();
  for (std::size_t count : {std::size_t{1}, std::size_t{32}, std::size_t{33}, std::size_t{5000}}) {
    std::vector<std::int64_t> values(count);
    for (std::size_t k = 0; k < count; ++k) values[k] = static_cast<std::int64_t>(k) * (comm.rank() + 1);
    comm.all_reduce(values.data(), static_cast<std::int64_t>(count), ReduceOp::sum);
    const std::int64_t ranks = comm.size();
    bool ok = true;
    for (std::size_t k = 0; k < count; ++k)
      ok = ok && values[k] == static_cast<std::int64_t>(k) * ranks * (ranks + 1) / 2;
    CAPTURE(count);
    REQUIRE_ON_ALL_RANKS(ok);
  }
}

TEST_CASE("a rank waiting for a late one in an agreement or a barrier sleeps instead of spinning a core",
          "[mpi][comm]") {
  // The last rank arrives 300 ms late; the others' thread CPU time while they wait stays a small
  // part of the wait (a spinning wait, MPI's own, takes the whole of a free core).
  const Communicator& comm = world();
  if (comm.size() < 2) return;
  const auto thread_cpu_seconds = [] {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
  };
  for (int collective = 0; collective < 2; ++collective) {
    const bool late = comm.rank() == comm.size() - 1;
    comm.barrier();
    if (late) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto wall_start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    if (collective == 0) {
      comm.agree(nullptr);  // the agreement every collective_try ends with
    } else {
      comm.barrier();
    }
    const double cpu = thread_cpu_seconds() - cpu_start;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    CAPTURE(collective, cpu, wall);
    // Under a sanitizer its own work and slowdown make thread CPU time no measure of spinning: the
    // collectives still run, the bound is not checked.
    REQUIRE_ON_ALL_RANKS((late || strider::testing::kSanitized || (wall > 0.2 && cpu < 0.3 * wall)));
  }
}

TEST_CASE("a rank kept waiting at the entry of a collective call warns, then goes on", "[mpi][comm]") {
  // The last rank arrives 600 ms late with the warning set at 0.2 s: every other rank warns once
  // and all go on; on time, nobody warns.
  const Communicator& comm = world();
  ::setenv("STRIDER_COLLECTIVE_WARN_S", "0.2", 1);
  comm.barrier();  // the ranks leave together, so that the first call below is on time
  const bool on_time = comm.arrive_together("a test call");
  const bool late = comm.rank() == comm.size() - 1;
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const bool warned = comm.arrive_together("a test call");
  ::unsetenv("STRIDER_COLLECTIVE_WARN_S");
  CAPTURE(on_time, late, warned);
  REQUIRE_ON_ALL_RANKS((!on_time && warned == (!late && comm.size() > 1)));
}

TEST_CASE("seed consensus: rank 0's seed reaches every rank", "[mpi][seed]") {
  const Communicator& comm = world();
  // Each rank passes a different seed; rank 0's wins.
  const std::int64_t agreed = agree_on_seed(comm, 1000 + comm.rank());
  REQUIRE_ON_ALL_RANKS(agreed == 1000);
  // A drawn seed is the same on every rank.
  const std::int64_t drawn = agree_on_seed(comm, std::nullopt);
  const auto all = comm.all_gather(drawn);
  REQUIRE_ON_ALL_RANKS(all == std::vector<std::int64_t>(all.size(), drawn));
}

TEST_CASE("a failure on one rank makes every rank throw the same error", "[mpi][failure]") {
  const Communicator& comm = world();
  const int failing = comm.size() - 1;
  bool threw = false;
  int failing_rank = -1, exit_code = -1, ranks = -1;
  ErrorKind kind = ErrorKind::other;
  std::string message;
  try {
    comm.collective_try([&] {
      if (comm.rank() == failing) STRIDER_THROW(DataError, "cannot open data.h5: no such file");
    });
  } catch (const AgreedError& error) {
    threw = true;
    failing_rank = error.failing_rank();
    exit_code = error.exit_code();
    message = error.what();
    kind = error.kind();
    ranks = error.ranks();
  }
  REQUIRE_ON_ALL_RANKS(threw);
  REQUIRE_ON_ALL_RANKS(failing_rank == failing);
  REQUIRE_ON_ALL_RANKS(message.find("cannot open data.h5: no such file") != std::string::npos);
  REQUIRE_ON_ALL_RANKS(message.find("[rank " + std::to_string(failing) + "]") != std::string::npos);
  REQUIRE_ON_ALL_RANKS(exit_code == 1);
  REQUIRE_ON_ALL_RANKS(kind == ErrorKind::data);  // the failing rank's type reaches every rank
  REQUIRE_ON_ALL_RANKS(ranks == comm.size());
  // Every rank got it; and the communicator still works afterwards.
  REQUIRE(comm.all_reduce(threw ? 1 : 0, ReduceOp::min) == 1);

  // Several failing ranks: the lowest speaks; usage errors keep exit code 2.
  threw = false;
  std::string reason;
  try {
    comm.collective_try([&] { STRIDER_THROW(UsageError, "bad option on rank " + std::to_string(comm.rank())); });
  } catch (const AgreedError& error) {
    threw = true;
    failing_rank = error.failing_rank();
    exit_code = error.exit_code();
    reason = error.reason();
    kind = error.kind();
  }
  REQUIRE_ON_ALL_RANKS(threw);
  REQUIRE_ON_ALL_RANKS(failing_rank == 0);
  REQUIRE_ON_ALL_RANKS(reason == "bad option on rank 0");
  REQUIRE_ON_ALL_RANKS(exit_code == 2);
  REQUIRE_ON_ALL_RANKS(kind == ErrorKind::usage);
  // A usage error on the last rank only: its exit code (2) reaches every rank, not rank 0's default.
  exit_code = -1;
  try {
    comm.collective_try([&] {
      if (comm.rank() == failing) STRIDER_THROW(UsageError, "bad option on the last rank");
    });
  } catch (const AgreedError& error) {
    exit_code = error.exit_code();
  }
  REQUIRE_ON_ALL_RANKS(exit_code == 2);
  // No failure: the body's value comes back.
  const int doubled = comm.collective_try([&] { return comm.rank() * 2; });
  REQUIRE_ON_ALL_RANKS(doubled == comm.rank() * 2);
}

TEST_CASE("plan consensus: the same plan hash on every rank, and the ranks cover the epoch", "[mpi][plan]") {
  const Communicator& comm = world();
  const std::int64_t seed = agree_on_seed(comm, std::nullopt);
  for (std::int64_t n : {1, 10, 997}) {
    DistributedSamplerConfig config;
    config.dataset_size = n;
    config.batch_size = 8;
    config.seed = seed;
    DistributedSampler mine(config, comm.size(), comm.rank());
    mine.set_epoch(3);
    // Each rank hashes the whole job's plan (every rank's); all must agree.
    Fnv1a64 global;
    for (int rank = 0; rank < comm.size(); ++rank) {
      DistributedSampler other(config, comm.size(), rank);
      other.set_epoch(3);
      global.add(plan_hash(other));
    }
    const auto hashes = comm.all_gather(global.value());
    REQUIRE_ON_ALL_RANKS(hashes == std::vector<std::uint64_t>(hashes.size(), global.value()));
    const auto steps = comm.all_gather(mine.num_steps());
    REQUIRE_ON_ALL_RANKS(steps == std::vector<std::int64_t>(steps.size(), mine.num_steps()));

    // Gather every rank's indices: they cover 0..N-1.
    std::vector<std::int64_t> flags(static_cast<std::size_t>(n), 0);
    std::vector<std::int64_t> batch;
    for (std::int64_t step = 0; step < mine.num_steps(); ++step) {
      mine.batch(step, batch);
      for (std::int64_t index : batch) flags[static_cast<std::size_t>(index)] = 1;
    }
    comm.all_reduce(flags.data(), n, ReduceOp::max);
    REQUIRE(flags == std::vector<std::int64_t>(flags.size(), 1));  // agreed: the result of an all-reduce
  }
}

TEST_CASE("MPI-IO: the test runtime started MPI with a thread-safe MPI-IO", "[mpi][comm]") {
  // The MPI tests write files with parallel HDF5 while stores serve rows from other threads
  // (prefer_thread_safe_mpi_io in MpiRuntime): with Open MPI 4's ompio that can crash.
  REQUIRE_ON_ALL_RANKS(mpi_io_is_thread_safe());
}
