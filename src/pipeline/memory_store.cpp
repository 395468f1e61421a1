// The in-memory store: the plan of the load (one chunk-aligned range of rows per rank), the budget
// check, the node segment (an MPI-3 shared window), the load itself, and reading batches from it.
#include "strider/pipeline/memory_store.hpp"

#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "core/test_hooks.hpp"
#include "io/batch_layout.hpp"
#include "io/row_gather.hpp"
#include "pipeline/pages.hpp"
#include "pipeline/store_exchange.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/comm/node_groups.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"

namespace strider {

namespace {

using Clock = std::chrono::steady_clock;
using pipeline_detail::fetch_remote_rows;
using pipeline_detail::RemoteFetch;
using pipeline_detail::StoreServer;

/// The load reads at most this many bytes per read() call (a multiple of the chunk's rows): memory
/// the file's engine may need on the side (the hdf5 engine's scratch) stays bounded.
constexpr std::int64_t kLoadPieceBytes = std::int64_t{32} << 20;
/// Nodes copy their rows to each other (replicate layout, labels) in broadcasts of at most this.
constexpr std::int64_t kCopyPieceBytes = std::int64_t{64} << 20;
constexpr auto kPageBytes = static_cast<std::int64_t>(pipeline_detail::kPageBytes);
/// What an MPI implementation adds to a shared window for itself (Open MPI's osc/sm: a few KiB of
/// control data): room left in /dev/shm beyond the segment.
constexpr std::int64_t kWindowOverheadBytes = 1 << 20;
/// Batches per request to other nodes (BatchReader::batches_per_read) when the rows are partitioned
/// over nodes. A request and its reply cost tens to hundreds of microseconds of latency and two
/// wake-ups whatever they carry; at batches of 256 rows of 256 B one batch's remote rows take a few
/// microseconds to copy.
constexpr std::int64_t kBatchesPerRequest = 16;

using pipeline_detail::round_up;

/// A number from a file of one line ("max" or a missing file: -1).
std::int64_t read_number_file(const std::string& path) {
  std::ifstream file(path);
  std::string text;
  if (!(file >> text) || text == "max") return -1;
  try {
    return std::stoll(text);
  } catch (...) {
    return -1;
  }
}

/// Bytes as a message shows them, with "unlimited" for -1.
std::string memory_text(std::int64_t bytes) {
  return bytes < 0 ? std::string("unlimited") : format_bytes(bytes);
}

/// Proportional set size of the pages of [begin, begin + bytes) mapped in this process, bytes.
std::int64_t pss_of_range(const std::byte* begin, std::int64_t bytes) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return -1;
  const auto first = reinterpret_cast<std::uintptr_t>(begin);
  const std::uintptr_t end = first + static_cast<std::uintptr_t>(bytes);
  std::string line;
  bool inside = false;
  std::int64_t total_kb = 0;
  while (std::getline(smaps, line)) {
    unsigned long low = 0, high = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (line.find('-') != std::string::npos && (fields >> std::hex >> low >> dash >> high) && dash == '-' &&
        line.find(':') > line.find(' ')) {
      inside = low < end && high > first;
      continue;
    }
    if (inside && line.rfind("Pss:", 0) == 0) total_kb += std::atoll(line.c_str() + 4);
  }
  return total_kb * 1024;
}

/// The share of each rank, and of each node, in rows.
struct LoadPlan {
  std::vector<int> rank_order;            // comm ranks, node by node (piece k is rank_order[k]'s)
  std::vector<std::int64_t> piece_first;  // R + 1 row boundaries
  std::vector<int> piece_of_rank;         // comm rank -> piece
  std::vector<std::int64_t> node_first;   // nodes + 1 row boundaries: node p's ranks' pieces
};

LoadPlan plan_load(const NodeGroups& groups, const DatasetInfo& info, const std::vector<std::int64_t>& token_offsets) {
  LoadPlan plan;
  for (int node = 0; node < groups.nodes(); ++node)
    for (int rank : groups.ranks_of(node)) plan.rank_order.push_back(rank);
  const auto pieces = static_cast<std::int64_t>(plan.rank_order.size());
  plan.piece_of_rank.resize(plan.rank_order.size());
  for (std::int64_t k = 0; k < pieces; ++k)
    plan.piece_of_rank[static_cast<std::size_t>(plan.rank_order[k])] = static_cast<int>(k);

  const std::int64_t rows = info.num_samples;
  // Cut at chunk boundaries (whole chunks per rank: each chunk is read and decompressed once);
  // sequences are cut by tokens, so that each rank reads about as many bytes.
  const std::int64_t chunk = info.layout == "chunked" && !info.chunk_shape.empty() ? info.chunk_shape[0] : 1;
  plan.piece_first.resize(static_cast<std::size_t>(pieces) + 1);
  for (std::int64_t k = 0; k <= pieces; ++k) {
    std::int64_t row = 0;
    if (!info.variable_length) {
      const double target = static_cast<double>(rows) * static_cast<double>(k) / static_cast<double>(pieces);
      row = std::min(rows, static_cast<std::int64_t>(target / static_cast<double>(chunk) + 0.5) * chunk);
    } else {
      const std::int64_t tokens = token_offsets[static_cast<std::size_t>(rows)] - token_offsets[0];
      const double target = static_cast<double>(tokens) * static_cast<double>(k) / static_cast<double>(pieces);
      const std::int64_t aligned =
          token_offsets[0] + static_cast<std::int64_t>(target / static_cast<double>(chunk) + 0.5) * chunk;
      row = std::lower_bound(token_offsets.begin(), token_offsets.end(), aligned) - token_offsets.begin();
      row = std::min(row, rows);
    }
    plan.piece_first[static_cast<std::size_t>(k)] =
        k == pieces ? rows : std::max(row, k > 0 ? plan.piece_first[k - 1] : 0);
  }
  plan.piece_first[0] = 0;
  std::int64_t piece = 0;
  plan.node_first.push_back(0);
  for (int node = 0; node < groups.nodes(); ++node) {
    piece += static_cast<std::int64_t>(groups.ranks_of(node).size());
    plan.node_first.push_back(plan.piece_first[static_cast<std::size_t>(piece)]);
  }
  return plan;
}

/// The store's own communicator (its messages never mix with the caller's). A store abandoned on
/// one rank (MemoryStore::abandon) frees it there, but Open MPI then keeps it for the replies its
/// server sent to readers that gave up, which never complete: that memory is still held at exit.
/// The leak checker's suppression for the cases that abandon a store on purpose (tests/CMakeLists.txt,
/// [abandons]) names this function for that reason.
__attribute__((noinline)) Communicator duplicate_store_communicator(const Communicator& comm) {
  return Communicator::duplicate(comm.native());
}

/// The kernel's setting for transparent huge pages of shared memory (the bracketed word of
/// /sys/kernel/mm/transparent_hugepage/shmem_enabled: always, within_size, advise, never, deny,
/// force), or "" where it cannot be read.
std::string shmem_huge_pages_setting() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string text;
  std::getline(file, text);
  const std::size_t open = text.find('['), close = text.find(']');
  return open != std::string::npos && close != std::string::npos && close > open
             ? text.substr(open + 1, close - open - 1)
             : "";
}

std::string huge_pages_unavailable_reason() {
  const std::string setting = shmem_huge_pages_setting();
  return setting.empty() ? "this kernel offers no transparent huge pages for shared memory"
                         : "transparent huge pages for shared memory are '" + setting +
                               "' here (/sys/kernel/mm/transparent_hugepage/shmem_enabled; advise or always "
                               "would give 2 MiB pages)";
}

/// madvise(MADV_HUGEPAGE) over the 2 MiB-aligned part of [data, data + bytes); true where the
/// kernel may then back it with huge pages (shmem_enabled advise, always, within_size or force).
bool ask_for_huge_pages(std::byte* data, std::int64_t bytes) {
  const std::string setting = shmem_huge_pages_setting();
  if (setting != "advise" && setting != "always" && setting != "within_size" && setting != "force") return false;
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto first = (reinterpret_cast<std::uintptr_t>(data) + kHuge - 1) / kHuge * kHuge;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + static_cast<std::uintptr_t>(bytes)) / kHuge * kHuge;
  if (end <= first) return false;
  return ::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE) == 0;
#else
  return false;
#endif
}

/// An MPI-3 shared window, freed (collectively over its node) on destruction unless leaked.
struct SharedWindow {
  MPI_Win window = MPI_WIN_NULL;
  bool locked = false;
  SharedWindow() = default;
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;
  ~SharedWindow() {
    if (window == MPI_WIN_NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (locked) MPI_Win_unlock_all(window);
    if (MPI_Win_free(&window) != MPI_SUCCESS) log_warn("store: MPI_Win_free failed");
  }
  /// Gives the window up without freeing it (MPI_Finalize does): for a rank that cannot wait for
  /// its node's other ranks.
  void leak() noexcept { window = MPI_WIN_NULL; }
};

/// The node's shared segment: samples, labels, token offsets and lengths, each page-aligned.
struct SegmentLayout {
  std::int64_t samples_bytes = 0;
  std::int64_t labels_at = 0, labels_bytes = 0;
  std::int64_t offsets_at = 0, offsets_bytes = 0;
  std::int64_t lengths_at = 0, lengths_bytes = 0;
  std::int64_t total = 0;
};

class NodeStore final : public MemoryStore {
 public:
  NodeStore(const Communicator& comm, std::unique_ptr<BatchReader> file, const StoreOptions& options);
  ~NodeStore() override;

  std::string engine() const override { return engine_; }
  const DatasetInfo& info() const override { return info_; }
  // Views of the segment (valid while the store lives), as the file reader held them: the labels
  // when it held them (class-aware plans; else empty, as its were), the lengths of sequences.
  SharedView<std::int32_t> labels() const override {
    return SharedView<std::int32_t>(nullptr, node_labels_,
                                    labels_held_ ? static_cast<std::size_t>(info_.num_samples) : 0);
  }
  SharedView<std::int64_t> lengths() const override {
    return SharedView<std::int64_t>(nullptr, node_lengths_,
                                    info_.variable_length ? static_cast<std::size_t>(info_.num_samples) : 0);
  }
  void read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) override;
  std::int64_t samples_bytes(const std::int64_t* indices, std::int64_t count) const override;
  void read(const std::int64_t* indices, std::int64_t count, const BatchDestination& destination) override;
  void read_batches(const BatchRead* reads, std::int64_t batches) override;
  /// Partitioned over nodes, a batch's rows of other nodes cost a round trip: several batches per
  /// request pay it once (the ring refills a quarter at a time, so a larger number is not used).
  std::int64_t batches_per_read() const override {
    return replicated_ || groups_.nodes() == 1 ? 1 : kBatchesPerRequest;
  }
  ReadStats stats() const override { return stats_; }
  std::int64_t resident_bytes() const override { return pss_of_range(segment_, layout_.total); }
  void abandon() noexcept override { abandoned_.store(true); }

 private:
  std::int64_t row_bytes(std::int64_t row) const {
    return info_.variable_length ? (token_offsets_[row + 1] - token_offsets_[row]) * element_bytes_
                                 : info_.sample_bytes;
  }
  /// Where row `row` (held by this node) starts in the segment.
  const std::byte* row_in_segment(std::int64_t row) const {
    return samples_ + (info_.variable_length ? (token_offsets_[row] - token_offsets_[first_row_]) * element_bytes_
                                             : (row - first_row_) * info_.sample_bytes);
  }
  int node_of_row(std::int64_t row) const {
    return static_cast<int>(std::upper_bound(node_first_.begin(), node_first_.end(), row) - node_first_.begin()) - 1;
  }
  std::int64_t bytes_between(std::int64_t first, std::int64_t end) const {
    return info_.variable_length ? (token_offsets_[end] - token_offsets_[first]) * element_bytes_
                                 : (end - first) * info_.sample_bytes;
  }
  void allocate_segment();
  void load_share(BatchReader& file, const LoadPlan& plan);
  void copy_between_nodes(const LoadPlan& plan);
  /// Makes every rank's writes to the segment visible to the node's other ranks (collective over
  /// the node).
  void synchronize_node(const std::string& what);
  /// The server's answer: rows of this node, back to back.
  void serve(const std::int64_t* rows, std::int64_t count, std::vector<std::byte>& out) const;

  Communicator comm_;  // the store's own: its messages never mix with the caller's
  NodeGroups groups_;
  std::string engine_;
  DatasetInfo info_;
  std::int64_t element_bytes_ = 1;
  bool labels_held_ = false;  // the file reader held every label (class-aware plans): labels() gives them
  bool replicated_ = false;
  std::vector<std::int64_t> node_first_;  // rows node p holds: [node_first_[p], node_first_[p + 1]) (partition)
  std::int64_t first_row_ = 0, end_row_ = 0;

  SegmentLayout layout_;
  SharedWindow window_;
  std::byte* segment_ = nullptr;
  std::byte* samples_ = nullptr;
  std::int32_t* node_labels_ = nullptr;    // every row's label, once per node
  std::int64_t* token_offsets_ = nullptr;  // sequences: every row's first token (N + 1), once per node
  std::int64_t* node_lengths_ = nullptr;   // sequences: every row's length (N), once per node, for the samplers

  // Every row on this node, fixed-size rows of a specialised size: batches are gathered by the
  // mmap engine's copy (constant row size, labels in the same pass); null otherwise.
  io_detail::FixedRowsGather gather_rows_ = nullptr, gather_rows_labels_ = nullptr;

  std::unique_ptr<StoreServer> server_;
  std::atomic<bool> abandoned_{false};
  ReadStats stats_;

  // Reused between batches.
  std::vector<std::int64_t> out_offsets_;
  struct LocalRow {
    const std::byte* from = nullptr;  // in the segment
    std::byte* out = nullptr;         // where its bytes go in its batch
    std::int64_t size = 0;
  };
  std::vector<LocalRow> local_rows_;  // the rows of this node to copy, in batch order
  struct RemoteRow {
    std::int64_t row = 0;
    std::byte* out = nullptr;  // where its bytes go in its batch
    std::int64_t size = 0;
  };
  std::vector<std::vector<RemoteRow>> remote_rows_;  // per node: the rows asked there, in request order
  std::vector<RemoteFetch> fetches_;
  std::vector<std::byte> replies_;
};

NodeStore::NodeStore(const Communicator& comm, std::unique_ptr<BatchReader> file, const StoreOptions& options)
    : comm_(duplicate_store_communicator(comm)), groups_(NodeGroups::split(comm_)) {
  const Clock::time_point start = Clock::now();
  comm_.collective_try([&] { check_store_options(options); });
  info_ = file->info();
  engine_ = file->engine();
  element_bytes_ = static_cast<std::int64_t>(element_bytes(info_.element_type));
  const std::int64_t rows = info_.num_samples;
  labels_held_ = !file->labels().empty();
  // The file reader's (every rank has them); a view into it, read only before file.reset() below.
  const SharedView<std::int64_t> lengths = file->lengths();

  // Token offsets from the lengths, for the plan and then the segment.
  std::vector<std::int64_t> token_offsets;
  if (info_.variable_length) {
    token_offsets.resize(static_cast<std::size_t>(rows) + 1, 0);
    std::partial_sum(lengths.begin(), lengths.end(), token_offsets.begin() + 1);
  }
  const LoadPlan plan = plan_load(groups_, info_, token_offsets);
  node_first_ = plan.node_first;
  const auto share_bytes = [&](std::int64_t first, std::int64_t end) {
    return info_.variable_length ? (token_offsets[end] - token_offsets[first]) * element_bytes_
                                 : (end - first) * info_.sample_bytes;
  };
  const std::int64_t labels_bytes = info_.has_labels ? rows * 4 : 0;
  const std::int64_t offsets_bytes = info_.variable_length ? (rows + 1) * 8 : 0;
  const std::int64_t lengths_bytes = info_.variable_length ? rows * 8 : 0;
  const auto segment_bytes = [&](std::int64_t samples) {
    return round_up(samples, kPageBytes) + round_up(labels_bytes, kPageBytes) + round_up(offsets_bytes, kPageBytes) +
           round_up(lengths_bytes, kPageBytes);
  };

  // The budget of every node, known to every rank: its first rank's figure.
  NodeMemory memory;
  std::int64_t budget = 0;
  if (groups_.local_rank() == 0) {
    memory = node_memory();
    budget = options.budget_bytes > 0
                 ? options.budget_bytes
                 : static_cast<std::int64_t>(kDefaultStoreBudgetFraction * static_cast<double>(memory.available()));
  }
  const std::vector<std::int64_t> budget_of_rank = comm_.all_gather(budget);
  std::int64_t smallest_budget = INT64_MAX;
  for (int node = 0; node < groups_.nodes(); ++node)
    smallest_budget = std::min(smallest_budget, budget_of_rank[static_cast<std::size_t>(groups_.ranks_of(node)[0])]);
  const std::int64_t whole = segment_bytes(share_bytes(0, rows));
  std::string layout_name = options.layout;
  if (layout_name == "auto") layout_name = whole <= smallest_budget ? "replicate" : "partition";
  replicated_ = layout_name == "replicate" || groups_.nodes() == 1;
  first_row_ = replicated_ ? 0 : node_first_[static_cast<std::size_t>(groups_.node())];
  end_row_ = replicated_ ? rows : node_first_[static_cast<std::size_t>(groups_.node()) + 1];
  const std::int64_t needed = segment_bytes(share_bytes(first_row_, end_row_));

  // Checked on every node before anything is read: a node that cannot hold its share says so.
  comm_.collective_try([&] {
    if (groups_.local_rank() != 0) return;
    const std::string what =
        replicated_ ? "every row" : "rows " + std::to_string(first_row_) + ".." + std::to_string(end_row_ - 1);
    // The shared window of a node of several ranks lives in /dev/shm, whatever --store-budget says.
    // Open MPI refuses a window /dev/shm cannot hold on the rank that makes it while the node's
    // other ranks wait inside MPI_Win_allocate_shared for ever: refused here, on every rank.
    const std::int64_t window_bytes = needed + kPageBytes + kWindowOverheadBytes;
    if (groups_.local_size() > 1 && memory.shm_free >= 0 && window_bytes > memory.shm_free)
      STRIDER_THROW(SystemError, "--store memory: node " + std::to_string(groups_.node()) + " needs " +
                                     format_bytes(needed) + " (" + what + (labels_bytes > 0 ? " and every label" : "") +
                                     ") of shared memory but /dev/shm has " + format_bytes(memory.shm_free) +
                                     " free; free or enlarge /dev/shm, spread the rows over more nodes "
                                     "(--store-layout partition), or read from the file with --store none");
    if (needed <= budget) return;
    std::string helps = replicated_ && groups_.nodes() > 1 ? "use --store-layout partition (each node holds 1/" +
                                                                 std::to_string(groups_.nodes()) + " of the rows), "
                                                           : "spread the rows over more nodes, ";
    helps += "raise --store-budget, or read from the file with --store none (--lookahead L on chunked data)";
    STRIDER_THROW(
        UsageError,
        "--store memory: node " + std::to_string(groups_.node()) + " needs " + format_bytes(needed) + " (" + what +
            (labels_bytes > 0 ? " and every label" : "") + ") but its budget is " + format_bytes(budget) +
            (options.budget_bytes > 0 ? " (--store-budget)"
                                      : " (" + std::to_string(static_cast<int>(kDefaultStoreBudgetFraction * 100)) +
                                            "% of the least of " + memory.describe() + ")") +
            "; " + helps);
  });

  store_info_.layout = layout_name;
  store_info_.nodes_text = groups_.describe();
  store_info_.nodes = groups_.nodes();
  store_info_.node = groups_.node();
  store_info_.first_row = first_row_;
  store_info_.end_row = end_row_;
  store_info_.budget_bytes = budget_of_rank[static_cast<std::size_t>(groups_.ranks_of(groups_.node())[0])];

  layout_.samples_bytes = round_up(share_bytes(first_row_, end_row_), kPageBytes);
  layout_.labels_at = layout_.samples_bytes;
  layout_.labels_bytes = labels_bytes;
  layout_.offsets_at = layout_.labels_at + round_up(labels_bytes, kPageBytes);
  layout_.offsets_bytes = offsets_bytes;
  layout_.lengths_at = layout_.offsets_at + round_up(offsets_bytes, kPageBytes);
  layout_.lengths_bytes = lengths_bytes;
  layout_.total = std::max(layout_.lengths_at + round_up(lengths_bytes, kPageBytes), kPageBytes);
  store_info_.node_bytes = layout_.total;
  comm_.collective_try([&] { allocate_segment(); });
  const double allocated_at = std::chrono::duration<double>(Clock::now() - start).count();
  // The offsets and lengths are every rank's already: the node's first rank writes them once.
  if (info_.variable_length && groups_.local_rank() == 0) {
    std::copy(token_offsets.begin(), token_offsets.end(), token_offsets_);
    std::copy(lengths.begin(), lengths.end(), node_lengths_);
  }
  comm_.collective_try([&] { synchronize_node("waiting for the node's token offsets"); });
  token_offsets.clear();
  token_offsets.shrink_to_fit();

  const ReadStats before = file->stats();
  comm_.collective_try([&] { load_share(*file, plan); });
  const double loaded_at = std::chrono::duration<double>(Clock::now() - start).count();
  store_info_.load_bytes_read = file->stats().bytes_read - before.bytes_read;
  comm_.collective_try([&] { copy_between_nodes(plan); });
#ifdef MADV_POPULATE_READ
  // Every rank maps the whole segment now: otherwise each page the other ranks wrote costs this rank
  // a page fault on its first read (a slow first epoch). Without it (before Linux 5.14) the pages
  // fault in as they are read.
  ::madvise(segment_, static_cast<std::size_t>(layout_.total), MADV_POPULATE_READ);
#endif
  file.reset();  // collective for the hdf5 engine: every rank is here
  if (!info_.variable_length && first_row_ == 0 && end_row_ == info_.num_samples) {
    gather_rows_ = io_detail::fixed_rows_gather(info_.sample_bytes, false);
    gather_rows_labels_ = io_detail::fixed_rows_gather(info_.sample_bytes, true);
  }
  log_debug("store: segment backed after ", allocated_at, " s, share loaded after ", loaded_at,
            " s, copies done after ", std::chrono::duration<double>(Clock::now() - start).count(), " s");

  if (!replicated_ && groups_.nodes() > 1)
    server_ = std::make_unique<StoreServer>(
        comm_.native(), [this](const std::int64_t* rows_asked, std::int64_t count, std::vector<std::byte>& out) {
          serve(rows_asked, count, out);
        });
  static bool warned_mpi_io = false;
  if (server_ && comm_.is_root() && !warned_mpi_io && !mpi_io_is_thread_safe()) {
    warned_mpi_io = true;
    log_warn(
        "store: Open MPI 4's ompio may crash if this process does MPI-IO (e.g. parallel HDF5 writes) while "
        "the store serves other nodes; export OMPI_MCA_io=^ompio before starting the job (strider's apps do)");
  }
  comm_.barrier();  // every node loaded, every server answering
  store_info_.load_seconds =
      comm_.all_reduce(std::chrono::duration<double>(Clock::now() - start).count(), ReduceOp::max);
  if (comm_.is_root())
    log_info("store: ", rows, info_.variable_length ? " sequences" : " rows", " loaded in ", store_info_.load_seconds,
             " s, ", store_info_.layout, " over ", store_info_.nodes_text, ", ", format_bytes(store_info_.node_bytes),
             " per node (budget ", format_bytes(store_info_.budget_bytes), ")");
}

void NodeStore::allocate_segment() {
  const MPI_Comm node = groups_.node_comm();
  // One page more than the layout: the segment is used from its first page boundary (the window's
  // base need not be page-aligned), so that every section starts on a page.
  const MPI_Aint mine = groups_.local_rank() == 0 ? static_cast<MPI_Aint>(layout_.total + kPageBytes) : 0;
  void* base = nullptr;
  STRIDER_MPI_CHECK(MPI_Win_allocate_shared(mine, 1, MPI_INFO_NULL, node, &base, &window_.window),
                    "allocating " + format_bytes(layout_.total) + " of node memory for the store");
  STRIDER_MPI_CHECK(MPI_Win_set_errhandler(window_.window, MPI_ERRORS_RETURN), "");
  MPI_Aint size = 0;
  int unit = 0;
  STRIDER_MPI_CHECK(MPI_Win_shared_query(window_.window, 0, &size, &unit, &base), "finding the node's store segment");
  STRIDER_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_.window), "");
  window_.locked = true;
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  segment_ =
      static_cast<std::byte*>(base) + (kPageBytes - static_cast<std::int64_t>(address % kPageBytes)) % kPageBytes;
  samples_ = segment_;
  node_labels_ = info_.has_labels ? reinterpret_cast<std::int32_t*>(segment_ + layout_.labels_at) : nullptr;
  token_offsets_ = info_.variable_length ? reinterpret_cast<std::int64_t*>(segment_ + layout_.offsets_at) : nullptr;
  node_lengths_ = info_.variable_length ? reinterpret_cast<std::int64_t*>(segment_ + layout_.lengths_at) : nullptr;

  // Huge pages where the kernel offers them for shared memory (each first access of a 4 KiB page
  // costs a fault, microseconds in a virtual machine): asked for on every rank's mapping, before
  // any page is backed; the root says which it got.
  const bool huge = ask_for_huge_pages(segment_, layout_.total);
  if (comm_.is_root())
    log_info("store: the node segment ",
             huge ? "asks for 2 MiB pages (transparent_hugepage/shmem_enabled: " + shmem_huge_pages_setting() + ")"
                  : "uses 4 KiB pages: " + huge_pages_unavailable_reason());

    // Every page backed now, each rank a slice: a segment /dev/shm cannot hold fails here with an error
    // instead of a SIGBUS on first touch.
#ifdef MADV_POPULATE_WRITE
  const std::int64_t pages = layout_.total / kPageBytes;
  const std::int64_t first = pages * groups_.local_rank() / groups_.local_size();
  const std::int64_t end = pages * (groups_.local_rank() + 1) / groups_.local_size();
  if (end > first &&
      ::madvise(segment_ + first * kPageBytes, static_cast<std::size_t>((end - first) * kPageBytes),
                MADV_POPULATE_WRITE) != 0 &&
      errno != EINVAL)  // EINVAL: a kernel before 5.14; the pages fault in as the load writes them
    STRIDER_THROW(SystemError, "cannot back " + format_bytes(layout_.total) +
                                   " of node memory for the store (/dev/shm full? " + node_memory().describe() +
                                   "): " + std::strerror(errno) +
                                   "; lower the need with --store-layout partition or "
                                   "more nodes, or use --store none");
#endif
}

void NodeStore::load_share(BatchReader& file, const LoadPlan& plan) {
  const std::int64_t piece = plan.piece_of_rank[static_cast<std::size_t>(comm_.rank())];
  const std::int64_t first = plan.piece_first[static_cast<std::size_t>(piece)];
  const std::int64_t end = plan.piece_first[static_cast<std::size_t>(piece) + 1];
  const std::int64_t chunk =
      info_.layout == "chunked" && !info_.chunk_shape.empty() && !info_.variable_length ? info_.chunk_shape[0] : 1;
  const std::int64_t fail_at = detail::test_hooks().fail_load_piece;
  std::vector<std::int64_t> indices;
  std::int64_t pieces = 0;
  for (std::int64_t at = first; at < end; ++pieces) {
    // Whole chunks, at most kLoadPieceBytes (at least one chunk or row).
    std::int64_t stop = at;
    if (!info_.variable_length) {
      const std::int64_t rows = std::max<std::int64_t>(
          chunk, kLoadPieceBytes / std::max<std::int64_t>(1, info_.sample_bytes) / chunk * chunk);
      stop = std::min(end, at + rows);
    } else {
      do ++stop;
      while (stop < end && bytes_between(at, stop + 1) <= kLoadPieceBytes);
    }
    if (pieces == fail_at)
      STRIDER_THROW(SystemError, "pread failed loading rows " + std::to_string(at) + ".." + std::to_string(stop - 1) +
                                     " into the store: injected I/O error (STRIDER_TEST_FAIL_LOAD)");
    indices.resize(static_cast<std::size_t>(stop - at));
    std::iota(indices.begin(), indices.end(), at);
    BatchDestination destination;
    destination.samples = const_cast<std::byte*>(row_in_segment(at));
    destination.samples_capacity_bytes = bytes_between(at, stop);
    destination.labels = node_labels_ != nullptr ? node_labels_ + at : nullptr;
    file.read(indices.data(), stop - at, destination);
    at = stop;
  }
}

void NodeStore::synchronize_node(const std::string& what) {
  STRIDER_MPI_CHECK(MPI_Win_sync(window_.window), "");
  STRIDER_MPI_CHECK(MPI_Barrier(groups_.node_comm()), what);
  STRIDER_MPI_CHECK(MPI_Win_sync(window_.window), "");
}

void NodeStore::copy_between_nodes(const LoadPlan& plan) {
  synchronize_node("waiting for the node's ranks to load");
  const bool labels = node_labels_ != nullptr;
  if (groups_.nodes() > 1 && (replicated_ || labels) && groups_.local_rank() == 0) {
    // Node q's first rank broadcasts the rows its node loaded (every label; the samples too when
    // every node holds every row) to the other nodes' first ranks, in bounded pieces.
    const MPI_Comm leaders = groups_.leaders_comm();
    const auto broadcast = [&](std::byte* data, std::int64_t bytes, int root) {
      for (std::int64_t done = 0; done < bytes; done += kCopyPieceBytes) {
        const int piece = static_cast<int>(std::min(kCopyPieceBytes, bytes - done));
        STRIDER_MPI_CHECK(MPI_Bcast(data + done, piece, MPI_BYTE, root, leaders),
                          "copying the rows of node " + std::to_string(root) + " to the other nodes");
        if (root != groups_.node()) store_info_.load_bytes_copied += piece;
      }
    };
    for (int node = 0; node < groups_.nodes(); ++node) {
      const std::int64_t first = plan.node_first[static_cast<std::size_t>(node)];
      const std::int64_t end = plan.node_first[static_cast<std::size_t>(node) + 1];
      if (replicated_) broadcast(const_cast<std::byte*>(row_in_segment(first)), bytes_between(first, end), node);
      if (labels) broadcast(reinterpret_cast<std::byte*>(node_labels_ + first), (end - first) * 4, node);
    }
  }
  synchronize_node("waiting for the copies between nodes");
}

void NodeStore::serve(const std::int64_t* rows, std::int64_t count, std::vector<std::byte>& out) const {
  std::int64_t bytes = 0;
  for (std::int64_t k = 0; k < count; ++k) {
    if (rows[k] < first_row_ || rows[k] >= end_row_)
      STRIDER_THROW(Error, "asked for row " + std::to_string(rows[k]) + ", which this node does not hold");
    bytes += row_bytes(rows[k]);
  }
  out.resize(static_cast<std::size_t>(bytes));
  std::int64_t at = 0;
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t size = row_bytes(rows[k]);
    std::memcpy(out.data() + at, row_in_segment(rows[k]), static_cast<std::size_t>(size));
    at += size;
  }
}

std::int64_t NodeStore::samples_bytes(const std::int64_t* indices, std::int64_t count) const {
  if (!info_.variable_length) return count * info_.sample_bytes;
  std::int64_t bytes = 0;
  for (std::int64_t k = 0; k < count; ++k)
    if (indices[k] >= 0 && indices[k] < info_.num_samples) bytes += row_bytes(indices[k]);
  return bytes;
}

void NodeStore::read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) {
  if (!info_.has_labels) STRIDER_THROW(UsageError, "read_labels: the dataset has no labels");
  if (first < 0 || count < 0 || first > info_.num_samples - count)
    STRIDER_THROW(UsageError, "read_labels: rows " + std::to_string(first) + " + " + std::to_string(count) +
                                  " are outside [0, " + std::to_string(info_.num_samples) + ")");
  std::copy(node_labels_ + first, node_labels_ + first + count, out);
}

void NodeStore::read(const std::int64_t* indices, std::int64_t count, const BatchDestination& destination) {
  const BatchRead one{indices, count, destination};
  read_batches(&one, 1);
}

void NodeStore::read_batches(const BatchRead* reads, std::int64_t batches) {
  const Clock::time_point start = Clock::now();
  // Lay out every batch, fill its labels and offsets, and list its rows: this node's, and the
  // others' by owner.
  std::int64_t bytes = 0, remote_bytes = 0, fast_bytes = 0;
  local_rows_.clear();
  remote_rows_.resize(static_cast<std::size_t>(groups_.nodes()));
  for (std::vector<RemoteRow>& rows : remote_rows_) rows.clear();
  for (std::int64_t b = 0; b < batches; ++b) {
    const std::int64_t* indices = reads[b].indices;
    const std::int64_t count = reads[b].count;
    const BatchDestination& destination = reads[b].destination;
    bytes += io_detail::lay_out_batch(
        indices, count, info_.num_samples, info_.path.empty() ? "the dataset" : info_.path, destination,
        [this](std::int64_t row) { return row_bytes(row); }, out_offsets_);
    const bool labels = destination.labels != nullptr && node_labels_ != nullptr;
    if (gather_rows_ != nullptr) {  // every row here: rows and labels in one pass, done
      (labels ? gather_rows_labels_ : gather_rows_)(samples_, reinterpret_cast<const std::byte*>(node_labels_), indices,
                                                    0, count, destination.samples, destination.labels);
      fast_bytes += count * info_.sample_bytes;
      continue;
    }
    if (labels)
      for (std::int64_t k = 0; k < count; ++k) destination.labels[k] = node_labels_[indices[k]];
    if (destination.offsets != nullptr && info_.variable_length)
      for (std::int64_t k = 0; k <= count; ++k) destination.offsets[k] = out_offsets_[k] / element_bytes_;
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t row = indices[k];
      const std::int64_t size = out_offsets_[k + 1] - out_offsets_[k];
      std::byte* const out = destination.samples + out_offsets_[k];
      if (replicated_ || (row >= first_row_ && row < end_row_)) {
        local_rows_.push_back(LocalRow{row_in_segment(row), out, size});
      } else {
        remote_rows_[static_cast<std::size_t>(node_of_row(row))].push_back(RemoteRow{row, out, size});
        remote_bytes += size;
      }
    }
  }

  // Rows of other nodes: one request per owner node for all the batches (split only past the
  // message limits), sent first so that the local copies below overlap the other nodes' answers.
  fetches_.clear();
  if (static_cast<std::int64_t>(replies_.size()) < remote_bytes)
    replies_.resize(static_cast<std::size_t>(remote_bytes));
  std::int64_t at = 0;
  for (int node = 0; node < groups_.nodes(); ++node) {
    const std::vector<RemoteRow>& rows = remote_rows_[static_cast<std::size_t>(node)];
    const std::vector<int>& servers = groups_.ranks_of(node);
    const int server = servers[static_cast<std::size_t>(groups_.local_rank()) % servers.size()];
    for (std::size_t k = 0; k < rows.size(); ++k) {
      if (k == 0 || fetches_.back().reply_bytes + rows[k].size > pipeline_detail::kMaxReplyBytes ||
          static_cast<std::int64_t>(fetches_.back().rows.size()) >= pipeline_detail::kMaxRequestRows) {
        fetches_.push_back(RemoteFetch{server, {}, replies_.data() + at, 0});
      }
      fetches_.back().rows.push_back(rows[k].row);
      fetches_.back().reply_bytes += rows[k].size;
      at += rows[k].size;
    }
  }
  std::int64_t local_bytes = 0;
  const auto copy_local_rows = [&] {
    const std::size_t rows = local_rows_.size();
    for (std::size_t k = 0; k < rows; ++k) {
      if (k + io_detail::kRowsAhead < rows) __builtin_prefetch(local_rows_[k + io_detail::kRowsAhead].from);
      const LocalRow& row = local_rows_[k];
      if (row.size > 0) std::memcpy(row.out, row.from, static_cast<std::size_t>(row.size));
      local_bytes += row.size;
    }
  };
  fetch_remote_rows(comm_.native(), fetches_, abandoned_, copy_local_rows);
  at = 0;
  for (const std::vector<RemoteRow>& rows : remote_rows_) {
    for (const RemoteRow& row : rows) {
      if (row.size > 0) std::memcpy(row.out, replies_.data() + at, static_cast<std::size_t>(row.size));
      at += row.size;
    }
  }
  stats_.useful_bytes += bytes;
  stats_.bytes_local += local_bytes + fast_bytes;
  stats_.bytes_remote += remote_bytes;
  stats_.remote_requests += static_cast<std::int64_t>(fetches_.size());
  stats_.batches += batches;
  stats_.read_calls += static_cast<std::int64_t>(fetches_.size());
  stats_.read_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

NodeStore::~NodeStore() {
  if (abandoned_.load()) {
    // Not collective: stop answering and leave the segment to MPI_Finalize.
    if (server_) server_->stop();
    window_.leak();
    return;
  }
  // Collective: once every rank is here, no rank can ask for rows any more. A rank whose Loader is
  // never destroyed would leave the others here: they say so (STRIDER_COLLECTIVE_WARN_S) and wait on.
  try {
    comm_.arrive_together("the in-memory store's teardown (destroying a Loader with --store memory)");
  } catch (const std::exception& error) {
    log_warn("store: the closing barrier failed: ", error.what());
  }
  if (server_) server_->stop();
}

}  // namespace

// ---- the public part ----------------------------------------------------------------------------

void check_store_options(const StoreOptions& options) {
  check_choice(options.mode, {"none", "memory"}, "--store value");
  check_choice(options.layout, {"partition", "replicate", "auto"}, "--store-layout value");
  if (options.budget_bytes < 0)
    STRIDER_THROW(UsageError,
                  "--store-budget must be >= 0 (0: the default), got " + std::to_string(options.budget_bytes));
}

std::int64_t NodeMemory::available() const noexcept {
  std::int64_t least = -1;
  for (std::int64_t value : {mem_available, cgroup_free, shm_free})
    if (value >= 0 && (least < 0 || value < least)) least = value;
  return std::max<std::int64_t>(least, 0);
}

std::string NodeMemory::describe() const {
  return "MemAvailable " + memory_text(mem_available) + ", cgroup " + memory_text(cgroup_free) +
         (cgroup_free >= 0 ? " free" : "") + ", /dev/shm free " + memory_text(shm_free);
}

NodeMemory node_memory() noexcept {
  NodeMemory memory;
  try {
    std::ifstream meminfo("/proc/meminfo");
    std::string name;
    std::int64_t kilobytes = 0;
    std::string unit;
    while (meminfo >> name >> kilobytes) {
      std::getline(meminfo, unit);
      if (name == "MemAvailable:") memory.mem_available = kilobytes * 1024;
    }
    // cgroup v2: "0::/path" in /proc/self/cgroup.
    std::ifstream cgroup("/proc/self/cgroup");
    std::string line;
    while (std::getline(cgroup, line)) {
      if (line.rfind("0::", 0) != 0) continue;
      const std::string directory = "/sys/fs/cgroup" + line.substr(3);
      const std::int64_t limit = read_number_file(directory + "/memory.max");
      const std::int64_t used = read_number_file(directory + "/memory.current");
      if (limit >= 0) memory.cgroup_free = std::max<std::int64_t>(0, limit - std::max<std::int64_t>(used, 0));
    }
    struct statvfs shm {};
    if (::statvfs("/dev/shm", &shm) == 0)
      memory.shm_free = static_cast<std::int64_t>(shm.f_bavail) * static_cast<std::int64_t>(shm.f_frsize);
  } catch (...) {
  }
  return memory;
}

std::unique_ptr<MemoryStore> MemoryStore::load(const Communicator& comm, std::unique_ptr<BatchReader> file,
                                               const StoreOptions& options) {
  if (!file) STRIDER_THROW(UsageError, "MemoryStore::load needs a reader");
  return std::make_unique<NodeStore>(comm, std::move(file), options);
}

MemoryStore::~MemoryStore() = default;

}  // namespace strider
