#pragma once
/// \file
/// The in-memory store (`--store memory`): the job reads the dataset once, in storage order, into
/// memory shared by the ranks of each node, and then serves every batch from memory in whatever
/// order the plan wants: rows its node holds by memcpy out of the shared segment, rows other nodes
/// hold by asking a rank of that node (one request per owner node and batch, answered by a thread
/// of that rank whatever its own pipeline is doing). Epochs after the load read nothing from the
/// file.
///
/// Load: the rows are split into one contiguous, chunk-aligned range per rank (node by node), so
/// every chunk is read and decompressed once in the whole job, straight into the node's segment
/// (an MPI-3 shared window, backed by /dev/shm), in pieces of bounded size, through the file's own
/// BatchReader (any engine; one file or several). Layouts:
///   partition  each node holds the rows of its own ranks' ranges: node memory is the dataset / nodes;
///   replicate  each node holds every row (after the load, the nodes copy their ranges to each other):
///              no traffic between nodes afterwards;
///   auto       replicate when the whole dataset fits one node's budget, else partition.
/// Labels and (for sequences) token offsets and lengths are held once per node, every row of them on
/// every node; the store's labels() and lengths() are views of them, which the Loader hands its
/// samplers: no rank holds a copy of its own.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

/// The fraction of a node's available memory (NodeMemory::available) that a store may take when no
/// budget is given: half, leaving the rest for the ring, the training process and the page cache.
inline constexpr double kDefaultStoreBudgetFraction = 0.5;

/// What `--store`, `--store-layout` and `--store-budget` set.
struct StoreOptions {
  std::string mode = "none";      ///< none | memory
  std::string layout = "auto";    ///< partition | replicate | auto
  std::int64_t budget_bytes = 0;  ///< per node; 0: kDefaultStoreBudgetFraction of NodeMemory::available()
};

/// Throws UsageError naming the option for a mode other than none|memory or a layout other than
/// partition|replicate|auto, or a negative budget. Pure.
void check_store_options(const StoreOptions& options);

/// The memory a node can give a store, in bytes; -1 where unknown or unlimited.
struct NodeMemory {
  std::int64_t mem_available = -1;  ///< MemAvailable of /proc/meminfo
  std::int64_t cgroup_free = -1;    ///< this process's cgroup (v2): memory.max - memory.current; -1 without a limit
  std::int64_t shm_free = -1;       ///< free space of /dev/shm, which backs shared windows (overrunning it is a SIGBUS)
  /// The least of the known values (0 when none is known).
  std::int64_t available() const noexcept;
  /// "MemAvailable 21.4 GB, cgroup unlimited, /dev/shm free 24.0 GB".
  std::string describe() const;
};

/// Reads the node's memory figures now. Not collective; never throws (unknown values stay -1).
NodeMemory node_memory() noexcept;

/// What a loaded store holds, for reports and logs (this rank's view).
struct StoreInfo {
  std::string layout;                  ///< "partition" or "replicate" (what auto chose)
  std::string nodes_text;              ///< how the ranks were grouped ("2 nodes of 2 ranks (STRIDER_NODE_SIZE=2)")
  int nodes = 1;                       ///< nodes in the job (NodeGroups)
  int node = 0;                        ///< this rank's node
  std::int64_t first_row = 0;          ///< the rows this node holds: [first_row, end_row)
  std::int64_t end_row = 0;            ///<
  std::int64_t node_bytes = 0;         ///< bytes of this node's shared segment (samples, labels, offsets)
  std::int64_t budget_bytes = 0;       ///< the per-node budget it was checked against
  double load_seconds = 0.0;           ///< the whole load, until every rank of the job had finished it
  std::int64_t load_bytes_read = 0;    ///< bytes this rank read from the file during the load
  std::int64_t load_bytes_copied = 0;  ///< bytes this rank received from other nodes during the load
};

/// A dataset held in node memory: a BatchReader (give it to a Prefetcher; the Loader does) that
/// serves rows from the node's segment and from other nodes. Thread model as every BatchReader: one
/// thread calls read() at a time; the store's own thread answers other ranks' requests meanwhile.
class MemoryStore : public BatchReader {
 public:
  /// Collective over comm: every rank must call with the same options and a reader of the same
  /// dataset. Groups the ranks by node (NodeGroups, STRIDER_NODE_SIZE), checks the per-node budget
  /// on every node before anything is read (one line: what is needed, what is available, what
  /// helps), loads, and closes `file` (a local close: each engine opens its files on its own rank). Every failure is
  /// agreed: every rank throws the same AgreedError. `comm` need not outlive the store.
  static std::unique_ptr<MemoryStore> load(const Communicator& comm, std::unique_ptr<BatchReader> file,
                                           const StoreOptions& options);

  /// Collective over the communicator it was loaded on, unless abandon() was called: waits until
  /// no rank can ask this one for rows any more (warning after STRIDER_COLLECTIVE_WARN_S seconds,
  /// as Communicator::arrive_together), then frees the node segment. Never throws.
  ~MemoryStore() override;

  const StoreInfo& store_info() const noexcept { return store_info_; }
  /// This rank's proportional share (PSS) of the node segment's resident pages, from
  /// /proc/self/smaps: summed over a node's ranks, the memory the node's store takes. Not
  /// collective; -1 when smaps cannot be read.
  virtual std::int64_t resident_bytes() const = 0;
  /// Makes a wait for other nodes' rows give up (read() throws) now and every later read() of
  /// remote rows fail at once, and makes the destructor local (no collective): for a rank that stops
  /// without the others (an error unwinding on this rank only). The store's thread still answers
  /// the other ranks until MPI_Finalize. Thread-safe.
  virtual void abandon() noexcept = 0;

 protected:
  MemoryStore() = default;
  StoreInfo store_info_;
};

}  // namespace strider
