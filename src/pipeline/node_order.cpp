#include "pipeline/node_order.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <new>
#include <string>

#include "comm/backoff.hpp"
#include "strider/comm/node_groups.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/pipeline/memory_store.hpp"
#include "strider/sampling/random.hpp"

namespace strider::pipeline_detail {

namespace {

using Clock = std::chrono::steady_clock;

/// The segment: a page of header, then the order.
constexpr std::int64_t kHeaderBytes = 4096;

/// A name no other segment on this node has: the writer's pid, a count of this process's segments
/// and the clock.
std::string segment_name() {
  static std::atomic<int> made{0};
  return "/strider-order-" + std::to_string(::getpid()) + "-" + std::to_string(made++) + "-" +
         std::to_string(Clock::now().time_since_epoch().count());
}

/// Maps `bytes` of the shared memory object `name`, creating it (and backing every byte, so that a
/// full /dev/shm is an error here rather than a SIGBUS later) when `create`. Returns MAP_FAILED and
/// sets `why` on failure.
void* map_segment(const std::string& name, std::int64_t bytes, bool create, std::string& why) {
  const int fd = ::shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) {
    why = "shm_open " + name + ": " + std::strerror(errno);
    return MAP_FAILED;
  }
  if (create) {
    const int failed = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (failed != 0) {
      why = "backing " + format_bytes(bytes) + " in /dev/shm: " + std::strerror(failed);
      ::close(fd);
      ::shm_unlink(name.c_str());
      return MAP_FAILED;
    }
  }
  void* mapping = ::mmap(nullptr, static_cast<std::size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) why = "mmap of " + format_bytes(bytes) + ": " + std::strerror(errno);
  ::close(fd);  // the mapping keeps the memory
  if (mapping == MAP_FAILED && create) ::shm_unlink(name.c_str());
  return mapping;
}

}  // namespace

/// At the segment's start. `version` is odd while a rank writes the order (the rank that made it odd
/// with a compare-and-swap: one writer at a time); n and seed name the order held (or being written).
struct NodeOrder::Header {
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::int64_t> n{0};
  std::atomic<std::uint64_t> seed{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free,
              "the node's order is shared between processes through lock-free atomics");

namespace {

/// A segment of `bytes` that every rank of a node maps (`mapping`; MAP_FAILED on every rank of the
/// node where none is shared: bytes <= 0, a node of one rank, or a segment that cannot be made or mapped,
/// logged as "plan: " + `without`). Collective over comm. `init` runs on the segment's maker
/// before the others map it.
struct NodeSegment {
  void* mapping = MAP_FAILED;
  int local_rank = 0, local_size = 1;
};
NodeSegment map_node_segment(const Communicator& comm, std::int64_t bytes, const char* what, const char* without,
                             const std::function<void(void*)>& init) {
  const NodeGroups groups = NodeGroups::split(comm);  // the only collective over comm
  NodeSegment segment;
  segment.local_rank = groups.local_rank();
  segment.local_size = groups.local_size();
  if (groups.local_size() == 1 || bytes <= 0) return segment;
  const MPI_Comm node = groups.node_comm();
  const bool writer = groups.local_rank() == 0;  // of the segment: it makes and names it

  // The writer makes the segment and sends its name; an empty name: nothing is shared on this node.
  std::string name, why;
  void* mapping = MAP_FAILED;
  if (writer) {
    const NodeMemory memory = node_memory();
    if (memory.shm_free >= 0 && bytes > memory.shm_free / 2) {
      why = std::string(what) + " needs " + format_bytes(bytes) + ", more than half of /dev/shm's free " +
            format_bytes(memory.shm_free);
    } else {
      name = segment_name();
      mapping = map_segment(name, bytes, true, why);
      if (mapping == MAP_FAILED) name.clear();
    }
    if (mapping != MAP_FAILED) init(mapping);
  }
  // The writer removes the name once every rank has mapped the segment (or failed, or thrown): the
  // mappings keep it, and nothing outlives the job.
  struct Unlink {
    std::string name;
    ~Unlink() {
      if (!name.empty()) ::shm_unlink(name.c_str());
    }
  } unlink_name{writer ? name : std::string()};
  int length = static_cast<int>(name.size());
  STRIDER_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, node), "sending the node's order segment");
  name.resize(static_cast<std::size_t>(length));
  if (length > 0)
    STRIDER_MPI_CHECK(MPI_Bcast(name.data(), length, MPI_CHAR, 0, node), "sending the node's order segment");
  if (!writer && length > 0) mapping = map_segment(name, bytes, false, why);
  int mapped = mapping != MAP_FAILED ? 1 : 0;
  // Every rank has opened it (or failed).
  STRIDER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, node), "mapping the node's order");
  if (mapped == 0) {
    if (mapping != MAP_FAILED) ::munmap(mapping, static_cast<std::size_t>(bytes));
    if (!why.empty()) log_info("plan: ", without, ": ", why);
    return segment;
  }
  segment.mapping = mapping;
  return segment;
}

}  // namespace

namespace {

/// The reading side of a segment's sequence lock (`version`: odd while a rank writes). `holds()`
/// says whether the segment names what is wanted; `copy()` copies it, false where it cannot be used
/// (never published, or not a plan). True once a copy was done while the version stood still.
/// False where it was not usable, overwritten while copied, or, where `wait`, did not begin within waits.start_seconds
/// or end within `finish_seconds` (logged: "the node's `what` did not ... ; `instead`"); at once
/// where not `wait`. A wait calls `work` (where not null) instead of pausing, until it returns false.
template <typename Holds, typename Copy>
bool copy_under_lock(const std::atomic<std::uint64_t>& version, Holds holds, Copy copy, bool wait,
                     const NodeOrderWaits& waits, double finish_seconds, const std::string& what, const char* instead,
                     const std::function<bool()>* work = nullptr) {
  const Clock::time_point start = Clock::now();
  // Yielding first where the caller waits in a YieldingWaits scope (Loader::epoch: a plan made when
  // the epoch starts, which the maker has within a millisecond): sleeping at once, a reader of w3's
  // plan at 2 ranks on 2 cores woke 0.05-0.1 ms after it was published. A plan made ahead waits
  // outside one and sleeps.
  detail::Backoff backoff(1000, detail::collective_yield_us());
  bool begun = false;  // its writer has begun it
  bool tried = false;  // a copy was tried and the content changed meanwhile
  for (;;) {
    const std::uint64_t seen = version.load(std::memory_order_acquire);
    const bool ours = holds();
    if (ours && seen % 2 == 0) {
      const bool copied = copy();
      std::atomic_thread_fence(std::memory_order_acquire);
      // What was read stands only if the version stood still (a writer that began meanwhile can
      // make a content look unpublished: look again).
      if (version.load(std::memory_order_relaxed) == seen) return copied;
      // Changed while copied: this content being written now (the version read was the previous
      // content's: look again), or overwritten by another (gone: below, on the next look).
      tried = true;
    } else if (tried && !ours) {
      return false;  // overwritten by another
    }
    if (!wait) return false;  // a writer's own content, gone, or a query: nobody else will write it
    begun = begun || ours;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > (begun ? finish_seconds : waits.start_seconds)) {
      log_debug("plan: the node's ", what, begun ? " did not finish" : " did not begin", " within ", waited, " s; ",
                instead);
      return false;
    }
    // The caller's own work, a slice at a time, rather than idling: a look after each.
    if (work != nullptr && (*work)()) continue;
    work = nullptr;  // none left
    backoff.pause();
  }
}

}  // namespace

std::shared_ptr<NodeOrder> NodeOrder::create(const Communicator& comm, std::int64_t n, NodeOrderWaits waits) {
  static_assert(sizeof(Header) <= kHeaderBytes);
  const std::int64_t bytes = n <= 0 ? 0 : kHeaderBytes + n * static_cast<std::int64_t>(sizeof(std::int64_t));
  const NodeSegment segment =
      map_node_segment(comm, bytes, "the order", "every rank shuffles each epoch's order itself (not once per node)",
                       [](void* mapping) { new (mapping) Header(); });
  if (segment.mapping == MAP_FAILED) return nullptr;
  return std::shared_ptr<NodeOrder>(
      new NodeOrder(segment.local_rank, segment.local_size, segment.mapping, bytes, waits));
}

NodeOrder::NodeOrder(int local_rank, int local_size, void* mapping, std::int64_t mapped_bytes, NodeOrderWaits waits)
    : local_rank_(local_rank),
      local_size_(local_size),
      mapping_(mapping),
      mapped_bytes_(mapped_bytes),
      header_(static_cast<Header*>(mapping)),
      order_(reinterpret_cast<std::int64_t*>(static_cast<std::byte*>(mapping) + kHeaderBytes)),
      waits_(waits) {}

NodeOrder::~NodeOrder() {
  ::munmap(mapping_, static_cast<std::size_t>(mapped_bytes_));
}

NodeOrder::Counts NodeOrder::counts() const {
  Counts counts;
  counts.shuffled = shuffled_.load(std::memory_order_relaxed);
  counts.copied = copied_.load(std::memory_order_relaxed);
  counts.alone = alone_count_.load(std::memory_order_relaxed);
  return counts;
}

namespace {
thread_local int on_this_rank_only = 0;  // OnThisRankOnly objects alive on this thread
}  // namespace

NodeOrder::OnThisRankOnly::OnThisRankOnly() noexcept {
  ++on_this_rank_only;
}
NodeOrder::OnThisRankOnly::~OnThisRankOnly() {
  --on_this_rank_only;
}

void NodeOrder::take(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride, std::int64_t count,
                     std::int64_t* out) {
  if (count <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const bool writer = writes(seed);
  if (n <= 0 || n > (mapped_bytes_ - kHeaderBytes) / static_cast<std::int64_t>(sizeof(std::int64_t)) ||
      (writer && !waits_.writer_publishes)) {
    take_alone(n, seed, first, stride, count, out);
    return;
  }
  if (on_this_rank_only > 0) {  // a copy of an order the node holds, without a wait, or alone
    if (!copy_from_node(n, seed, first, stride, count, out, false)) take_alone(n, seed, first, stride, count, out);
    return;
  }
  if (writer) {
    const bool held = header_->n.load(std::memory_order_relaxed) == n &&
                      header_->seed.load(std::memory_order_relaxed) == seed &&
                      header_->version.load(std::memory_order_acquire) % 2 == 0;
    // Another rank writing (an order planned out of turn) leaves this one to shuffle for itself.
    if (!held && !shuffle_into_node(n, seed)) {
      take_alone(n, seed, first, stride, count, out);
      return;
    }
  }
  // The writer too copies under the sequence lock: another rank may write the next order meanwhile.
  if (!copy_from_node(n, seed, first, stride, count, out, !writer)) take_alone(n, seed, first, stride, count, out);
}

bool NodeOrder::shuffle_into_node(std::int64_t n, std::uint64_t seed) {
  // The sequence lock, taken: odd while the order changes, so that a reader can tell a copy it must
  // not use, and so that no other rank writes at the same time.
  std::uint64_t version = header_->version.load(std::memory_order_relaxed);
  if (version % 2 != 0 || !header_->version.compare_exchange_strong(version, version + 1, std::memory_order_acquire,
                                                                    std::memory_order_relaxed))
    return false;
  std::atomic_thread_fence(std::memory_order_release);
  header_->n.store(n, std::memory_order_relaxed);
  header_->seed.store(seed, std::memory_order_relaxed);
  torch_randperm(n, seed, order_);
  header_->version.store(version + 2, std::memory_order_release);
  ++shuffled_;
  return true;
}

bool NodeOrder::copy_from_node(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride,
                               std::int64_t count, std::int64_t* out, bool reader) {
  const bool copied = copy_under_lock(
      header_->version,
      [&] {
        return header_->n.load(std::memory_order_relaxed) == n && header_->seed.load(std::memory_order_relaxed) == seed;
      },
      [&] {
        take_positions(order_, n, first, stride, count, out);
        return true;
      },
      reader, waits_, std::max(waits_.finish_seconds, 1e-9 * waits_.finish_ns_per_entry * static_cast<double>(n)),
      "order for seed " + std::to_string(seed), "shuffling it on this rank");
  if (copied && reader) ++copied_;
  return copied;
}

void NodeOrder::take_alone(std::int64_t n, std::uint64_t seed, std::uint64_t first, std::uint64_t stride,
                           std::int64_t count, std::int64_t* out) {
  torch_randperm(n, seed, alone_);  // its memory kept for the next time
  take_positions(alone_.data(), n, first, stride, count, out);
  ++alone_count_;
}

/// At the plan segment's start: `version` as NodeOrder's; `key` names the plan held (or being made);
/// `bytes` its size, -1 until published (or where its maker could not publish it).
struct NodePlan::Header {
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::uint64_t> key{0};
  std::atomic<std::int64_t> bytes{-1};
};

std::shared_ptr<NodePlan> NodePlan::create(const Communicator& comm, std::int64_t bytes, NodeOrderWaits waits) {
  static_assert(sizeof(Header) <= kHeaderBytes);
  const std::int64_t mapped = bytes <= 0 ? 0 : kHeaderBytes + bytes;
  const NodeSegment segment =
      map_node_segment(comm, mapped, "the plan", "every rank makes each epoch's plan itself (not once per node)",
                       [](void* mapping) { new (mapping) Header(); });
  if (segment.mapping == MAP_FAILED) return nullptr;
  return std::shared_ptr<NodePlan>(
      new NodePlan(segment.local_rank, segment.local_size, segment.mapping, mapped, waits));
}

NodePlan::NodePlan(int local_rank, int local_size, void* mapping, std::int64_t mapped_bytes, NodeOrderWaits waits)
    : local_rank_(local_rank),
      local_size_(local_size),
      mapping_(mapping),
      mapped_bytes_(mapped_bytes),
      header_(static_cast<Header*>(mapping)),
      plan_(static_cast<std::byte*>(mapping) + kHeaderBytes),
      capacity_(mapped_bytes - kHeaderBytes),
      waits_(waits) {}

NodePlan::~NodePlan() {
  ::munmap(mapping_, static_cast<std::size_t>(mapped_bytes_));
}

NodePlan::Counts NodePlan::counts() const {
  Counts counts;
  counts.published = published_.load(std::memory_order_relaxed);
  counts.copied = copied_.load(std::memory_order_relaxed);
  counts.alone = alone_.load(std::memory_order_relaxed);
  counts.ahead = ahead_.load(std::memory_order_relaxed);
  return counts;
}

void NodePlan::share(std::uint64_t key, std::uint64_t turn, const std::function<void()>& make,
                     const std::function<std::vector<Piece>()>& pieces,
                     const std::function<bool(const std::byte* data, std::int64_t bytes)>& load,
                     const std::function<bool()>& ahead) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool query = on_this_rank_only > 0;  // neither waits for the node's plan nor writes it
  const bool my_turn = writes(turn);
  // The next plan's maker starts on it while this one is made elsewhere, and goes on with it while
  // it waits: each rank then carries part of every epoch's planning, not all of every other epoch's.
  bool more_ahead = false;
  if (!my_turn && !query && writes(turn + 1) && ahead) {
    more_ahead = ahead();
    ++ahead_;
  }
  // A plan the node holds already is copied by anyone; a rank whose turn it is not waits for it.
  if (copy_from_node(key, load, !my_turn && !query, more_ahead ? &ahead : nullptr)) {
    ++copied_;
    return;
  }
  if (my_turn && !query && waits_.writer_publishes) {
    const Made made = make_into_node(key, make, pieces);
    if (made == Made::published) ++published_;
    if (made == Made::alone) ++alone_;
    if (made != Made::not_here) return;
  }
  make();  // another rank writing (a plan made out of turn), or no copy to be had
  ++alone_;
}

NodePlan::Made NodePlan::make_into_node(std::uint64_t key, const std::function<void()>& make,
                                        const std::function<std::vector<Piece>()>& pieces) {
  // The sequence lock, taken, with the key named at once: the node's readers see the plan begun and
  // wait for it while it is made.
  std::uint64_t version = header_->version.load(std::memory_order_relaxed);
  if (version % 2 != 0 || !header_->version.compare_exchange_strong(version, version + 1, std::memory_order_acquire,
                                                                    std::memory_order_relaxed))
    return Made::not_here;
  std::atomic_thread_fence(std::memory_order_release);
  header_->bytes.store(-1, std::memory_order_relaxed);
  header_->key.store(key, std::memory_order_relaxed);
  struct Release {  // also when make() throws: readers then find no bytes and make the plan themselves
    Header* header;
    std::uint64_t version;
    ~Release() { header->version.store(version + 2, std::memory_order_release); }
  } release{header_, version};
  make();
  const std::vector<Piece> parts = pieces();
  std::int64_t total = 0;
  for (const Piece& piece : parts) {
    if (piece.bytes < 0) return Made::alone;
    total += piece.bytes;
  }
  if (total > capacity_) return Made::alone;
  std::byte* at = plan_;
  for (const Piece& piece : parts) {
    if (piece.bytes > 0) std::memcpy(at, piece.data, static_cast<std::size_t>(piece.bytes));
    at += piece.bytes;
  }
  header_->bytes.store(total, std::memory_order_relaxed);
  return Made::published;
}

bool NodePlan::copy_from_node(std::uint64_t key, const std::function<bool(const std::byte*, std::int64_t)>& load,
                              bool wait, const std::function<bool()>* work) {
  return copy_under_lock(
      header_->version, [&] { return header_->key.load(std::memory_order_relaxed) == key; },
      [&] {
        const std::int64_t bytes = header_->bytes.load(std::memory_order_relaxed);
        return bytes >= 0 && bytes <= capacity_ && load(plan_, bytes);  // < 0: its maker could not publish it
      },
      wait, waits_,
      // The segment's bytes as entries of 4 (a bucketed plan's narrowest index): the longest a plan
      // of this size may take.
      std::max(waits_.finish_seconds,
               1e-9 * waits_.finish_ns_per_entry * static_cast<double>(capacity_) / sizeof(std::uint32_t)),
      "plan " + std::to_string(key), "making it on this rank", work);
}

std::shared_ptr<const ClassIndex> node_class_index(const Communicator& comm, const SharedView<std::int32_t>& labels,
                                                   int classes) {
  const auto offsets = static_cast<std::int64_t>(classes) + 1;
  const auto entries = offsets + static_cast<std::int64_t>(labels.size());
  const std::int64_t bytes = entries * static_cast<std::int64_t>(sizeof(std::int64_t));
  // The segment's maker sorts into it before the others map it: mapped, it is ready.
  const NodeSegment segment =
      map_node_segment(comm, bytes, "the class index", "every rank builds the class index itself (not once per node)",
                       [&](void* mapping) {
                         auto* first = static_cast<std::int64_t*>(mapping);
                         ClassIndex::sort_into(labels, classes, first, first + offsets);
                       });
  if (segment.mapping == MAP_FAILED) return std::make_shared<const ClassIndex>(labels, classes);
  const std::shared_ptr<const void> mapping(segment.mapping, [bytes](const void* address) {
    ::munmap(const_cast<void*>(address), static_cast<std::size_t>(bytes));
  });
  const auto* first = static_cast<const std::int64_t*>(segment.mapping);
  return std::make_shared<const ClassIndex>(labels,
                                            SharedView<std::int64_t>(mapping, first, static_cast<std::size_t>(offsets)),
                                            SharedView<std::int64_t>(mapping, first + offsets, labels.size()));
}

}  // namespace strider::pipeline_detail
