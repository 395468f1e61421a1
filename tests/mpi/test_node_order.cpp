// Each epoch's order once per node (pipeline/node_order.hpp): at every node size one rank of the
// node shuffles each order (in turn, by seed) and the others copy their positions, every entry
// torch's; writers that never publish leave the readers to shuffle alone, with the same entries and
// no hang. Each epoch's whole plan once per node (NodePlan), likewise, and a plan too large for the
// segment made by every rank. The Loader's batches are the same with the order (distributed) or
// the plan (bucketed) shared per node or made per rank.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loader_test_support.hpp"
#include "pipeline/node_order.hpp"
#include "strider/bench/prefetch_account.hpp"
#include "strider/comm/node_groups.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/sampling/random.hpp"

using namespace strider;
using namespace strider::testing;
using pipeline_detail::NodeOrder;
using pipeline_detail::NodeOrderWaits;
using pipeline_detail::NodePlan;

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

namespace {

/// A stand-in for a sampler's plan: `size` values made from the key, as the node shares them.
struct FakePlan {
  std::vector<std::int64_t> values;
  int made = 0;
  std::vector<std::uint64_t> ahead;  // the keys of the plans whose `ahead` ran here
  void share(NodePlan& node, std::uint64_t key, std::uint64_t turn, std::int64_t size) {
    node.share(
        key, turn,
        [&] {
          values.assign(static_cast<std::size_t>(size), 0);
          for (std::int64_t k = 0; k < size; ++k)
            values[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(key) * 7 + k;
          ++made;
        },
        [&] {
          return std::vector<SharedPlan::Piece>{
              {values.data(), static_cast<std::int64_t>(values.size() * sizeof(std::int64_t))}};
        },
        [&](const std::byte* data, std::int64_t bytes) {
          if (bytes % static_cast<std::int64_t>(sizeof(std::int64_t)) != 0) return false;
          values.resize(static_cast<std::size_t>(bytes) / sizeof(std::int64_t));
          std::memcpy(values.data(), data, static_cast<std::size_t>(bytes));
          return true;
        },
        [&] {
          ahead.push_back(key);
          return false;
        });
  }
  bool is(std::uint64_t key, std::int64_t size) const {
    if (static_cast<std::int64_t>(values.size()) != size) return false;
    for (std::int64_t k = 0; k < size; ++k)
      if (values[static_cast<std::size_t>(k)] != static_cast<std::int64_t>(key) * 7 + k) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("node plan: one rank of the node makes each plan, in turn, the others copy it; too large: every rank",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  const NodeOrderWaits patient = patient_waits();
  for (int size : node_sizes(comm.size())) {
    CAPTURE(size);
    const NodeSize node_size(size);
    const int local_size = NodeGroups::split(comm).local_size();
    const std::shared_ptr<NodePlan> node = NodePlan::create(comm, 100 * sizeof(std::int64_t), patient);
    REQUIRE_ON_ALL_RANKS((node != nullptr) == (local_size > 1));
    if (!node) continue;
    FakePlan plan;
    std::int64_t turns = 0;
    std::vector<std::uint64_t> ahead;  // the plans a wait here began the next of: not its turn, the next one's
    for (std::uint64_t turn : {7u, 8u}) {
      plan.share(*node, 100 + turn, turn, 100);
      REQUIRE_ON_ALL_RANKS(plan.is(100 + turn, 100));
      turns += node->writes(turn) ? 1 : 0;
      if (!node->writes(turn) && node->writes(turn + 1)) ahead.push_back(100 + turn);
      comm.barrier();  // every reader copied before the next plan is made
    }
    // Each plan made once, by the rank whose turn it was; the others copied it, and the next
    // plan's maker among them began that meanwhile.
    NodePlan::Counts counts = node->counts();
    CAPTURE(counts.published, counts.copied, counts.alone, counts.ahead, turns);
    const bool as_expected = plan.made == turns && counts.published == turns && counts.copied == 2 - turns &&
                             counts.alone == 0 && plan.ahead == ahead &&
                             counts.ahead == static_cast<std::int64_t>(ahead.size());
    REQUIRE_ON_ALL_RANKS(as_expected);
    REQUIRE(comm.all_reduce(turns, ReduceOp::max) == 1);         // two ranks made them
    REQUIRE(comm.all_reduce(counts.ahead, ReduceOp::max) == 1);  // and two began the next
    // A plan the node holds is copied by anyone, also its maker, and by a query of one rank.
    plan.share(*node, 108, 8, 100);
    if (!node->writes(8) && node->writes(9)) ahead.push_back(108);
    {
      const NodeOrder::OnThisRankOnly alone;
      plan.share(*node, 108, 8, 100);  // a query begins nothing
    }
    REQUIRE_ON_ALL_RANKS((plan.is(108, 100) && plan.made == turns && plan.ahead == ahead));
    comm.barrier();
    // Too large for the segment: made, not published; the others see it unpublished and make it
    // themselves at once, not after their (minute-long) wait.
    const std::shared_ptr<NodePlan> small = NodePlan::create(comm, 10 * sizeof(std::int64_t), patient);
    FakePlan large;
    const auto large_start = std::chrono::steady_clock::now();
    large.share(*small, 5, 0, 11);
    const double large_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - large_start).count();
    CAPTURE(large_seconds);
    REQUIRE_ON_ALL_RANKS((large.is(5, 11) && large.made == 1 && large_seconds < 30));
    const NodePlan::Counts small_counts = small->counts();
    REQUIRE_ON_ALL_RANKS((small_counts.alone == 1 && small_counts.published == 0 && small_counts.copied == 0));
    comm.barrier();
    // A query of one rank neither waits for a plan the node does not hold nor writes it.
    counts = node->counts();
    const auto start = std::chrono::steady_clock::now();
    {
      const NodeOrder::OnThisRankOnly alone;
      plan.share(*node, 200, 0, 50);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(seconds);
    REQUIRE_ON_ALL_RANKS((plan.is(200, 50) && seconds < 30));  // not the minute's wait
    REQUIRE_ON_ALL_RANKS((node->counts().published == counts.published && node->counts().alone == counts.alone + 1));
    comm.barrier();
  }
}

TEST_CASE("node plan: a rank waiting for the plan goes on with the next one's work, a slice at a time",
          "[mpi][loader][plan][pipeline]") {
  // On each node, the maker publishes only once the next plan's maker (the worker) has called
  // `ahead` a given number of times: it must call it again while it waits, until it returns false
  // or the plan is there, and never after false. Point-to-point messages on the node's
  // communicator from inside share(), with a bound on the maker's wait (a worker that never calls
  // again is a failure here, not a hang).
  const Communicator& comm = world();
  for (int size : node_sizes(comm.size())) {
    CAPTURE(size);
    const NodeSize node_size(size);
    const NodeGroups groups = NodeGroups::split(comm);
    const std::shared_ptr<NodePlan> node = NodePlan::create(comm, 100 * sizeof(std::int64_t), patient_waits());
    REQUIRE_ON_ALL_RANKS((node != nullptr) == (groups.local_size() > 1));
    if (!node) continue;
    int tag = 4200;
    for (const std::uint64_t turn : {std::uint64_t{4}, std::uint64_t{5}}) {
      const auto local_size = static_cast<std::uint64_t>(groups.local_size());
      const int maker = static_cast<int>(turn % local_size), worker = static_cast<int>((turn + 1) % local_size);
      // Calls of `ahead` that return true before one returns false: 2 (its first part and one
      // slice), or never false (work outlasting the wait): then the maker publishes after the third.
      for (const int until_false : {2, 0}) {
        CAPTURE(turn, until_false);
        ++tag;  // a message sent after a maker gave up is never taken for a later case's
        const int heard_at = until_false == 0 ? 3 : until_false;
        int calls = 0, heard = 0;
        FakePlan plan;
        const std::uint64_t key = 300 + turn * 10 + static_cast<std::uint64_t>(until_false);
        node->share(
            key, turn,
            [&] {
              MPI_Request request;
              MPI_Irecv(&heard, 1, MPI_INT, worker, tag, groups.node_comm(), &request);
              int done = 0;
              const auto start = std::chrono::steady_clock::now();
              while (done == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
                MPI_Test(&request, &done, MPI_STATUS_IGNORE);
                if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
              if (done == 0) {
                MPI_Cancel(&request);
                MPI_Wait(&request, MPI_STATUS_IGNORE);
              }
              plan.values.assign(100, 0);
              for (std::int64_t k = 0; k < 100; ++k)
                plan.values[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(key) * 7 + k;
            },
            [&] {
              return std::vector<SharedPlan::Piece>{
                  {plan.values.data(), static_cast<std::int64_t>(plan.values.size() * sizeof(std::int64_t))}};
            },
            [&](const std::byte* data, std::int64_t bytes) {
              plan.values.resize(static_cast<std::size_t>(bytes) / sizeof(std::int64_t));
              std::memcpy(plan.values.data(), data, plan.values.size() * sizeof(std::int64_t));
              return true;
            },
            [&] {
              ++calls;
              if (calls == heard_at) MPI_Send(&calls, 1, MPI_INT, maker, tag, groups.node_comm());
              return until_false == 0 || calls < until_false;
            });
        CAPTURE(calls, heard);
        const bool is_maker = groups.local_rank() == maker, is_worker = groups.local_rank() == worker;
        const bool as_expected = plan.is(key, 100) && (!is_maker || heard == heard_at) &&
                                 (!is_worker || (until_false == 0 ? calls >= heard_at : calls == until_false)) &&
                                 (is_worker || calls == 0);
        REQUIRE_ON_ALL_RANKS(as_expected);
        comm.barrier();  // every reader copied before the next plan is made
      }
    }
  }
}

TEST_CASE("node plan: makers that never publish leave the others to make the plan, without a hang",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  NodeOrderWaits silent;
  silent.writer_publishes = false;
  silent.start_seconds = 0.05;
  const std::shared_ptr<NodePlan> node = NodePlan::create(comm, 1024, silent);
  REQUIRE_ON_ALL_RANKS((node != nullptr) == (comm.size() > 1 && NodeGroups::split(comm).local_size() > 1));
  if (!node) return;
  const auto start = std::chrono::steady_clock::now();
  FakePlan plan;
  plan.share(*node, 3, 3, 20);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CAPTURE(seconds);
  REQUIRE_ON_ALL_RANKS((plan.is(3, 20) && seconds < 10));
  const NodePlan::Counts counts = node->counts();
  REQUIRE_ON_ALL_RANKS((counts.alone == 1 && counts.copied == 0 && counts.published == 0));
}

namespace {

/// The path of the mapping that holds `address` in /proc/self/maps ("" for none, "[heap]", ...).
std::string mapping_of(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, path;
    fields >> range >> permissions >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    const std::size_t dash = range.find('-');
    const std::uintptr_t first = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (at >= first && at < end) return path;
  }
  return "";
}

}  // namespace

TEST_CASE("node class index: built once per node into memory its ranks map, the same lists as every rank's",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  const auto labels = std::make_shared<const std::vector<std::int32_t>>(labels_from_class_counts({700, 20, 0, 5, 300}));
  const ClassIndex built(labels);
  for (int size : node_sizes(comm.size())) {
    CAPTURE(size);
    const NodeSize node_size(size);
    const int local_size = NodeGroups::split(comm).local_size();
    const std::shared_ptr<const ClassIndex> node = pipeline_detail::node_class_index(comm, labels, 5);
    bool same = node->num_classes() == 5 && node->labels_hash() == built.labels_hash();
    for (int label = 0; label < 5; ++label)
      same = same && std::vector<std::int64_t>(node->members(label), node->members(label) + node->count(label)) ==
                         std::vector<std::int64_t>(built.members(label), built.members(label) + built.count(label));
    REQUIRE_ON_ALL_RANKS(same);
    // Shared where the node has several ranks: the lists lie in a /dev/shm segment (unlinked once
    // mapped); a rank alone on its node builds them in its own memory.
    const std::string where = mapping_of(node->members(0));
    CAPTURE(where);
    REQUIRE_ON_ALL_RANKS((where.find("/strider-order-") != std::string::npos) == (local_size > 1));
  }
}

TEST_CASE("loader: the same batches with each epoch's order or plan shared per node or made per rank",
          "[mpi][loader][plan][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const TestFile sequences(comm, "sequences", 203);
  int mismatches = 0;
  bool copies_counted = true;
  // The distributed sampler shares its order; the bucketed sampler its whole plan.
  for (const auto& [file, mode] :
       {std::pair{&features, "distributed"}, std::pair{&sequences, "bucketed"}, std::pair{&features, "weighted"}}) {
    const LoaderOptions base = options_for(file->path(), mode, 9);
    std::vector<std::vector<std::uint64_t>> expected;
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) expected.push_back(expected_hashes(comm, base, epoch));
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
            UNSCOPED_INFO("mismatch: " << mode << ", node size " << size << (per_node ? ", per node" : ", per rank")
                                       << ", epoch " << epoch);
          }
        // Shared per node, every rank copied the orders or plans other ranks made (epochs 0-3 have
        // makers 0-3 mod the node's ranks; at least one, unless a wait ran out on a loaded machine);
        // per rank nobody copied. Planning took CPU either way.
        const std::int64_t copied = account->figures().epoch_orders_copied;
        // The class-aware modes share their class index (above), not their plans.
        const bool copies = per_node && groups.local_size() > 1 && std::string(mode) != "weighted";
        if ((copies ? copied < 1 : copied != 0) || !(account->figures().epoch_plan_cpu_seconds > 0)) {
          copies_counted = false;
          UNSCOPED_INFO("rank " << comm.rank() << ", " << mode << ", node size " << size
                                << (per_node ? ", per node" : ", per rank") << ": " << copied << " copied, "
                                << account->figures().epoch_plan_cpu_seconds << " s of planning CPU");
        }
      }
    }
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
  REQUIRE(everywhere(comm, copies_counted));
}
