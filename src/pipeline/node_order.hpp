#pragma once
// Each epoch's shuffled order once per node (issue 22): the distributed sampler of every rank
// shuffles all N entries (a pass of random accesses over 8N bytes) to keep N/R of them. With this,
// a node's first rank shuffles into POSIX shared memory its ranks map, and the others copy their
// positions out: the node plans once instead of once per rank, and holds the order once.
//
// Nothing waits on anything it could hang on. The writer never waits for the readers: it marks the
// order odd while it writes (a sequence lock), and a reader whose copy the writer overwrote, or
// whose order the writer did not start within a short wait or finish within a long one (a writer
// that died, or planned something else), shuffles the order itself. The batches are the same
// either way; only who computes differs.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/sampling/shared_order.hpp"

namespace strider::pipeline_detail {

/// How long a reader waits for the node's order before it shuffles it itself.
struct NodeOrderWaits {
  /// For the writer to begin this order (it plans the same epoch at about the same time: every
  /// rank plans after the same collective).
  double start_seconds = 1.0;
  /// Once begun, for it to end: the longer of this and finish_ns_per_entry per entry (a shuffle
  /// takes 5-20 ns per entry).
  double finish_seconds = 2.0;
  double finish_ns_per_entry = 200;
  /// Tests: the writer keeps its orders to itself (every reader then waits and shuffles alone).
  bool writer_publishes = true;
};

class NodeOrder final : public SharedOrder {
 public:
  /// Collective over comm (it splits comm into nodes, NodeGroups). Null on a node of one rank, for
  /// n <= 0, or where the node's shared memory cannot hold the order (logged; every rank of that
  /// node then shuffles alone, as without it).
  static std::shared_ptr<NodeOrder> create(const Communicator& comm, std::int64_t n, NodeOrderWaits waits = {});
  ~NodeOrder() override;  // unmaps only: not collective
  NodeOrder(const NodeOrder&) = delete;
  NodeOrder& operator=(const NodeOrder&) = delete;

  void take(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
            std::int64_t* out) override;

  /// What take() did so far on this rank: shuffled into the node's memory (the writer), copied from
  /// it, or shuffled alone.
  struct Counts {
    std::int64_t shuffled = 0, copied = 0, alone = 0;
  };
  Counts counts() const;
  bool writer() const noexcept { return writer_; }

 private:
  struct Header;
  NodeOrder(bool writer, void* mapping, std::int64_t mapped_bytes, NodeOrderWaits waits);
  void shuffle_into_node(std::int64_t n, std::uint64_t seed);
  bool copy_from_node(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
                      std::int64_t* out);
  void take_alone(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
                  std::int64_t* out);

  const bool writer_;
  void* const mapping_;
  const std::int64_t mapped_bytes_;
  Header* const header_;
  std::int64_t* const order_;  // the node's order: header_'s n entries
  const NodeOrderWaits waits_;
  mutable std::mutex mutex_;         // one take() at a time (the samplers of one Loader)
  std::vector<std::int64_t> alone_;  // a reader's own order, where it had to shuffle
  Counts counts_;                    // under mutex_
};

}  // namespace strider::pipeline_detail
