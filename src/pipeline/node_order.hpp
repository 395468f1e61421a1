#pragma once
// Each epoch's plan once per node (NodePlan, for the bucketed sampler, whose whole plan is the same
// on every rank), and each epoch's shuffled order once per node (NodeOrder): the distributed sampler of every rank
// shuffles all N entries (a pass of random accesses over 8N bytes) to keep N/R of them. With this,
// one rank of the node shuffles into POSIX shared memory its ranks map, and the others copy their
// positions out: the node plans once instead of once per rank, and holds the order once. The
// writer of an order is local rank (seed mod ranks of the node), so successive epochs (seed+epoch)
// take turns and no rank carries every shuffle.
//
// Nothing waits on anything it could hang on. A writer never waits for the readers: it takes the
// order's sequence lock (odd while it writes) with a compare-and-swap, or, where another rank holds
// it, shuffles for itself; a reader whose copy was overwritten meanwhile, or whose order its writer
// did not begin within a short wait or finish within a long one (a writer that died, or planned
// something else), shuffles the order itself. The batches are the same either way; only who
// computes differs.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/sampling/shared_order.hpp"

namespace strider::pipeline_detail {

/// How long a reader waits for the node's order before it shuffles it itself.
struct NodeOrderWaits {
  /// For the order's writer to begin it (it plans the same epoch at about the same time: every rank
  /// plans after the same collective).
  double start_seconds = 1.0;
  /// Once begun, for it to end: the longer of this and finish_ns_per_entry per entry (a shuffle
  /// takes 5-20 ns per entry).
  double finish_seconds = 2.0;
  double finish_ns_per_entry = 200;
  /// Tests: writers keep their orders to themselves (every reader then waits and shuffles alone).
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

  /// While one lives on a thread, that thread's take() copies the node's order only where it is
  /// there already, and otherwise shuffles alone: it neither waits for the order nor writes it. For
  /// a query one rank makes on its own (Loader::steps, Loader::state: not collective), when no other
  /// rank plans the same epoch: a reader would wait start_seconds for a writer that never comes,
  /// and a writer would overwrite the order other ranks may be copying.
  class OnThisRankOnly {
   public:
    OnThisRankOnly() noexcept;
    ~OnThisRankOnly();
    OnThisRankOnly(const OnThisRankOnly&) = delete;
    OnThisRankOnly& operator=(const OnThisRankOnly&) = delete;
  };

  /// What take() did so far on this rank: shuffled into the node's memory (as the order's writer),
  /// copied from it (written by another rank), or shuffled alone.
  struct Counts {
    std::int64_t shuffled = 0, copied = 0, alone = 0;
  };
  Counts counts() const;
  /// Whether this rank writes the order of `seed` (local rank seed mod the node's ranks).
  bool writes(std::uint64_t seed) const noexcept {
    return seed % static_cast<std::uint64_t>(local_size_) == static_cast<std::uint64_t>(local_rank_);
  }

 private:
  struct Header;
  NodeOrder(int local_rank, int local_size, void* mapping, std::int64_t mapped_bytes, NodeOrderWaits waits);
  bool shuffle_into_node(std::int64_t n, std::uint64_t seed);
  /// Copies this rank's positions of the node's order of (n, seed); false where it is not there or
  /// was overwritten while copied. A reader waits for it (NodeOrderWaits) and counts its copies; the
  /// order's writer, which has just written it, does neither, nor does a query (OnThisRankOnly).
  bool copy_from_node(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
                      std::int64_t* out, bool reader);
  void take_alone(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
                  std::int64_t* out);

  const int local_rank_, local_size_;
  void* const mapping_;
  const std::int64_t mapped_bytes_;
  Header* const header_;
  std::int64_t* const order_;  // the node's order: header_'s n entries
  const NodeOrderWaits waits_;
  std::mutex mutex_;                 // one take() at a time (the samplers of one Loader)
  std::vector<std::int64_t> alone_;  // a reader's own order, where it had to shuffle
  // What counts() reports: atomics, so that Loader::stats() never waits behind a shuffle that
  // holds mutex_ (seconds for N in the hundreds of millions).
  std::atomic<std::int64_t> shuffled_{0}, copied_{0}, alone_count_{0};
};

/// Each epoch's whole plan once per node, for a sampler whose plan is the same on every rank (the
/// bucketed sampler: it shuffles, sorts and packs all N samples, and each rank runs 1/R of the
/// batches). The rank whose turn it is (local rank `turn` mod the node's ranks) makes the plan with
/// the node's sequence lock held, so that the others see it begun, and copies it into memory the
/// node's ranks share; the others copy it out. The waits, the fallbacks (a rank makes the plan
/// itself) and queries of one rank (NodeOrder::OnThisRankOnly) are NodeOrder's.
class NodePlan final : public SharedPlan {
 public:
  /// Collective over comm. Null on a node of one rank, for bytes <= 0, or where the node's shared
  /// memory cannot hold `bytes` (logged). A plan larger than `bytes` is made by every rank.
  static std::shared_ptr<NodePlan> create(const Communicator& comm, std::int64_t bytes, NodeOrderWaits waits = {});
  ~NodePlan() override;  // unmaps only: not collective
  NodePlan(const NodePlan&) = delete;
  NodePlan& operator=(const NodePlan&) = delete;

  void share(std::uint64_t key, std::uint64_t turn, const std::function<void()>& make,
             const std::function<std::vector<Piece>()>& pieces,
             const std::function<bool(const std::byte* data, std::int64_t bytes)>& load,
             const std::function<bool()>& ahead) override;

  /// What share() did so far on this rank: made a plan and published it (its turn), copied the
  /// node's, or made one that nobody else reads (a missing, late or too large copy; a query); and
  /// the share() calls that called `ahead` before waiting for another rank's (whatever that did,
  /// and however often the wait called it again).
  struct Counts {
    std::int64_t published = 0, copied = 0, alone = 0, ahead = 0;
  };
  Counts counts() const;
  bool writes(std::uint64_t turn) const noexcept {
    return turn % static_cast<std::uint64_t>(local_size_) == static_cast<std::uint64_t>(local_rank_);
  }

 private:
  struct Header;
  enum class Made { not_here, published, alone };
  NodePlan(int local_rank, int local_size, void* mapping, std::int64_t mapped_bytes, NodeOrderWaits waits);
  /// With the sequence lock taken (not_here where another rank holds it): make(), then publish.
  Made make_into_node(std::uint64_t key, const std::function<void()>& make,
                      const std::function<std::vector<Piece>()>& pieces);
  /// The node's plan `key` handed to load; false where it is not there (after the waits, where
  /// `wait`), was not published, or changed while copied. A wait calls `work` (where not null)
  /// instead of pausing, until it returns false.
  bool copy_from_node(std::uint64_t key, const std::function<bool(const std::byte*, std::int64_t)>& load, bool wait,
                      const std::function<bool()>* work = nullptr);

  const int local_rank_, local_size_;
  void* const mapping_;
  const std::int64_t mapped_bytes_;
  Header* const header_;
  std::byte* const plan_;  // the node's plan: up to capacity_ bytes
  const std::int64_t capacity_;
  const NodeOrderWaits waits_;
  std::mutex mutex_;  // one share() at a time (the samplers of one Loader)
  std::atomic<std::int64_t> published_{0}, copied_{0}, alone_{0}, ahead_{0};
};

/// Collective over comm: the class-aware samplers' per-class lists of `labels` (checked: K =
/// `classes` = ClassIndex::classes_of), built once per node by one rank into memory the node's
/// ranks share and map (8 bytes per sample and per class), instead of by every rank and sampler.
/// Built on this rank alone on a node of one rank or where the node's shared memory cannot hold it
/// (logged). The same index either way.
std::shared_ptr<const ClassIndex> node_class_index(const Communicator& comm, const SharedView<std::int32_t>& labels,
                                                   int classes);

}  // namespace strider::pipeline_detail
