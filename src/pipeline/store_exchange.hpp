#pragma once
// Rows of other nodes, by request and reply on the store's own communicator. Each rank runs a
// server thread that answers requests from its node's shared segment, whatever its own pipeline is
// doing (a rank whose ring is full still answers, so one slow rank never stalls the others); a
// reader asks one rank of each owner node once per batch for all the rows it needs from there.
//
// Why not one-sided MPI_Get: with Open MPI 4.1 on ob1/vader the shared-memory windows come from the
// `sm` one-sided component, which covers one host only; a window over every node would take `pt2pt`
// (no MPI_THREAD_MULTIPLE) or `rdma` (needs a single-copy mechanism), and `ucx` where UCX is
// installed. Measured (bench/scripts/store_exchange_bench.cpp, README): one MPI_Get per row costs
// a batch of 256 rows of 256 B 1.3x this exchange with `sm` and 2.2x with `ucx`; rows of 64 KiB
// go 2.5x faster by MPI_Get (one copy instead of three on one host).
// Two-sided messages work on every transport; the request doubles the message count of a planned
// exchange but needs no plan and no lockstep between ranks.
//
// Waiting never blocks inside MPI (Open MPI's blocking calls spin a core): both sides poll with
// growing pauses (Backoff), which costs a few microseconds of latency under load and nothing idle.

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/backoff.hpp"

namespace strider::pipeline_detail {

using detail::Backoff;

/// Serves rows: writes the bytes of rows[0..count) back to back into `out` (resized to fit).
using RowServer = std::function<void(const std::int64_t* rows, std::int64_t count, std::vector<std::byte>& out)>;

/// Answers requests for rows on `comm` from a thread of its own until stop(). At MPI_Finalize (a
/// delete callback on MPI_COMM_SELF) every server still running is stopped, so a store kept alive
/// while an error unwinds never calls MPI after it.
class StoreServer {
 public:
  /// Starts the thread. `comm` must stay valid until stop() returned.
  StoreServer(MPI_Comm comm, RowServer serve);
  /// stop(). Never throws.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  /// Ends the thread: answers nothing new, waits briefly for replies in flight, then returns.
  /// Idempotent; never throws.
  void stop() noexcept;
  /// Requests answered so far.
  std::int64_t requests() const noexcept;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// One request: `rows` (any order, duplicates allowed) from `server`, whose reply of exactly
/// `reply_bytes` bytes lands in `reply`.
struct RemoteFetch {
  int server = 0;
  std::vector<std::int64_t> rows;
  std::byte* reply = nullptr;
  std::int64_t reply_bytes = 0;
};

/// The most bytes one reply carries and the most rows one request names (MPI counts are int): the
/// caller splits larger fetches.
inline constexpr std::int64_t kMaxReplyBytes = std::int64_t{1} << 28;
inline constexpr std::int64_t kMaxRequestRows = std::int64_t{1} << 22;

/// Sends every fetch's request, runs `meanwhile` (work that overlaps the other ranks' answers), and
/// receives every reply (replies of one server arrive in request order). Returns when all replies
/// are in. Throws MpiError for a failed call, or Error when `abandon` is or becomes true (posted
/// receives are cancelled first). Not collective; one thread per comm at a time.
void fetch_remote_rows(MPI_Comm comm, std::vector<RemoteFetch>& fetches, const std::atomic<bool>& abandon,
                       const std::function<void()>& meanwhile);

}  // namespace strider::pipeline_detail
