// Each epoch's order once per node (pipeline/node_order.hpp): at every node size one rank of the
// node shuffles each order (in turn, by seed) and the others copy their positions, every entry
// torch's; writers that never publish leave the readers to shuffle alone, with the same entries and
// no hang; the Loader's batches are the same with the order shared per node or shuffled per rank.
#include <chrono>

#include "loader_test_support.hpp"
#include "pipeline/node_order.hpp"
#include "strider/bench/prefetch_account.hpp"
#include "strider/comm/node_groups.hpp"
#include "strider/sampling/random.hpp"

using namespace strider;
using namespace strider::testing;
using pipeline_detail::NodeOrder;
using pipeline_detail::NodeOrderWaits;

namespace {

/// This rank's positions of torch_randperm(n, seed), as the distributed sampler takes them.
std::vector<std::int64_t> expected_positions(const Communicator& comm, std::int64_t n, std::uint64_t seed) {
  const std::vector<std::int64_t> order = torch_randperm(n, seed);
  const std::int64_t count = (n + comm.size() - 1) / comm.size();
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  take_positions(order.data(), n, static_cast<std::uint64_t>(comm.rank()), static_cast<std::uint64_t>(comm.size()),
                 count, out.data());
  return out;
}

std::vector<std::int64_t> taken(NodeOrder& order, const Communicator& comm, std::int64_t n, std::uint64_t seed) {
  const std::int64_t count = (n + comm.size() - 1) / comm.size();
  std::vector<std::int64_t> out(static_cast<std::size_t>(count), -1);
  order.take(n, seed, static_cast<std::uint64_t>(comm.rank()), static_cast<std::uint64_t>(comm.size()), count,
             out.data());
  return out;
}

/// Waits of a minute: long enough that a loaded machine never sends a reader to shuffle alone, and
/// a reader that waited for nothing would show.
NodeOrderWaits patient_waits() {
  NodeOrderWaits patient;
  patient.start_seconds = 60;
  patient.finish_seconds = 60;
  return patient;
}

}  // namespace

TEST_CASE("node order: one rank of the node shuffles each order, in turn, the others copy their positions",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  const NodeOrderWaits patient = patient_waits();
  for (int size : node_sizes(comm.size())) {
    CAPTURE(size);
    const NodeSize node_size(size);
    const int local_size = NodeGroups::split(comm).local_size();
    for (std::int64_t n : {1000, 3}) {
      CAPTURE(n);
      const std::shared_ptr<NodeOrder> order = NodeOrder::create(comm, n, patient);
      REQUIRE_ON_ALL_RANKS((order != nullptr) == (local_size > 1));
      if (!order) continue;
      // Local ranks 7 % L, 8 % L and 7 % L write (two different ranks where L > 1).
      std::int64_t writes = 0;
      for (std::uint64_t seed : {7u, 8u, 7u}) {
        REQUIRE_ON_ALL_RANKS(taken(*order, comm, n, seed) == expected_positions(comm, n, seed));
        writes += order->writes(seed) ? 1 : 0;
        comm.barrier();  // every reader copied before the next order is shuffled
      }
      // Each order shuffled once by its writer (the second 7 differs from the 8 the node holds),
      // copied by the others.
      const NodeOrder::Counts counts = order->counts();
      CAPTURE(counts.shuffled, counts.copied, counts.alone, writes);
      const bool as_expected = counts.alone == 0 && counts.shuffled == writes && counts.copied == 3 - writes;
      REQUIRE_ON_ALL_RANKS(as_expected);
      REQUIRE(comm.all_reduce(writes, ReduceOp::sum) == 3 * comm.size() / local_size);  // one writer per node
      REQUIRE(comm.all_reduce(writes, ReduceOp::max) == 2);  // the writers take turns: none wrote all three
      // An order the node holds already is not shuffled again.
      REQUIRE_ON_ALL_RANKS(taken(*order, comm, n, 7) == expected_positions(comm, n, 7));
      comm.barrier();
      REQUIRE_ON_ALL_RANKS(order->counts().shuffled == counts.shuffled);
    }
  }
}

TEST_CASE("node order: writers that never publish leave the readers to shuffle alone, without a hang",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  NodeOrderWaits silent;
  silent.writer_publishes = false;
  silent.start_seconds = 0.05;
  const std::shared_ptr<NodeOrder> order = NodeOrder::create(comm, 500, silent);
  REQUIRE_ON_ALL_RANKS((order != nullptr) == (comm.size() > 1 && NodeGroups::split(comm).local_size() > 1));
  if (!order) return;
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_ON_ALL_RANKS(taken(*order, comm, 500, 3) == expected_positions(comm, 500, 3));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CAPTURE(seconds);
  REQUIRE_ON_ALL_RANKS(seconds < 10);  // the short wait, then a shuffle of 500
  const NodeOrder::Counts counts = order->counts();
  const bool alone_once = counts.alone == 1 && counts.copied == 0 && counts.shuffled == 0;
  REQUIRE_ON_ALL_RANKS(alone_once);
}

TEST_CASE("node order: a query of one rank neither waits for the node's order nor writes it",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  const NodeOrderWaits patient = patient_waits();  // a reader outside the query would wait its minute
  const std::int64_t n = 1000;
  for (int size : node_sizes(comm.size())) {
    CAPTURE(size);
    const NodeSize node_size(size);
    const std::shared_ptr<NodeOrder> order = NodeOrder::create(comm, n, patient);
    if (!order) continue;  // a node of one rank shares nothing
    // Every rank queries seed 5 on its own (its writer too): nobody writes it, nobody waits.
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::int64_t> positions;
    {
      const NodeOrder::OnThisRankOnly alone;
      positions = taken(*order, comm, n, 5);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(seconds);
    REQUIRE_ON_ALL_RANKS(positions == expected_positions(comm, n, 5));
    REQUIRE_ON_ALL_RANKS(seconds < 30);  // a shuffle of 1000, not the minute's wait
    NodeOrder::Counts counts = order->counts();
    const bool alone_once = counts.alone == 1 && counts.shuffled == 0 && counts.copied == 0;
    REQUIRE_ON_ALL_RANKS(alone_once);
    comm.barrier();
    // An order the node holds is copied by a query, without a shuffle.
    REQUIRE_ON_ALL_RANKS(taken(*order, comm, n, 6) == expected_positions(comm, n, 6));
    comm.barrier();
    counts = order->counts();
    {
      const NodeOrder::OnThisRankOnly alone;
      REQUIRE_ON_ALL_RANKS(taken(*order, comm, n, 6) == expected_positions(comm, n, 6));
    }
    const NodeOrder::Counts after = order->counts();
    const bool copied = after.alone == counts.alone && after.shuffled == counts.shuffled;
    REQUIRE_ON_ALL_RANKS(copied);
    comm.barrier();
  }
}

TEST_CASE("loader: the same batches with each epoch's order shared per node or shuffled per rank",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const LoaderOptions base = options_for(features.path(), "distributed", 9);
  std::vector<std::vector<std::uint64_t>> expected;
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) expected.push_back(expected_hashes(comm, base, epoch));
  int mismatches = 0;
  bool copies_counted = true;
  for (int size : node_sizes(comm.size())) {
    const NodeSize node_size(size);
    const NodeGroups groups = NodeGroups::split(comm);
    for (bool per_node : {true, false}) {
      LoaderOptions options = base;
      options.diagnostics.plan_per_node = per_node;
      const auto account = std::make_shared<PrefetchAccount>();  // counts the plan events
      options.diagnostics.observer = account;
      Loader loader(comm, options);
      // Epochs in an order plan-ahead does not guess (2 after 0, then 1 and 0 again).
      for (std::int64_t epoch : {0, 2, 1, 0})
        if (loader_hashes(loader, epoch) != expected[static_cast<std::size_t>(epoch)]) {
          ++mismatches;
          UNSCOPED_INFO("mismatch: node size " << size << (per_node ? ", per node" : ", per rank") << ", epoch "
                                               << epoch);
        }
      // Shared per node, every rank copied the orders other ranks wrote (epochs 0-3 have writers
      // 0-3 mod the node's ranks; at least one, unless a wait ran out on a loaded machine); per rank
      // nobody copied. Planning took CPU either way.
      const std::int64_t copied = account->figures().epoch_orders_copied;
      const bool copies = per_node && groups.local_size() > 1;
      if ((copies ? copied < 1 : copied != 0) || !(account->figures().epoch_plan_cpu_seconds > 0)) {
        copies_counted = false;
        UNSCOPED_INFO("rank " << comm.rank() << ", node size " << size << (per_node ? ", per node" : ", per rank")
                              << ": " << copied << " orders copied, " << account->figures().epoch_plan_cpu_seconds
                              << " s of planning CPU");
      }
    }
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
  REQUIRE(everywhere(comm, copies_counted));
}
