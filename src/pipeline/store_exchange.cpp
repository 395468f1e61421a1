#include "pipeline/store_exchange.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "strider/comm/mpi_check.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/core/log.hpp"

namespace strider::pipeline_detail {

namespace {

constexpr int kRequestTag = 1;
constexpr int kReplyTag = 2;
/// Longest pause of an idle server between polls, and of a reader waiting for replies.
constexpr int kServerMaxSleepUs = 100;
constexpr int kReaderMaxSleepUs = 50;
/// How long a stopping server waits for replies in flight (their readers normally took them
/// already; a reader that gave up never will).
constexpr auto kStopGrace = std::chrono::seconds(2);

/// Whether each reply buffer is fingerprinted when it is sent and checked when its send completes:
/// in every build without NDEBUG (the sanitizer builds), where ThreadSanitizer cannot see a write
/// into a buffer that Open MPI may still read (its suppressions cover Open MPI's own copies).
#ifdef NDEBUG
constexpr bool kCheckReplies = false;
#else
constexpr bool kCheckReplies = true;
#endif

/// The fingerprint of a reply buffer: FNV-1a over its bytes.
std::uint64_t fingerprint(const std::vector<std::byte>& bytes) noexcept {
  Fnv1a64 hash;
  hash.add_bytes(bytes.data(), bytes.size());
  return hash.value();
}

}  // namespace

// ---- the server ------------------------------------------------------------------------------

struct StoreServer::State {
  MPI_Comm comm = MPI_COMM_NULL;
  RowServer serve;
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> requests{0};
  std::thread thread;
  std::mutex join_mutex;  // stop() from the owner and from MPI_Finalize's callback

  void run() noexcept;
  void join() noexcept {
    stop.store(true);
    std::lock_guard<std::mutex> lock(join_mutex);
    if (thread.joinable()) thread.join();
  }
};

namespace {

/// The servers still running, stopped at MPI_Finalize by a delete callback on MPI_COMM_SELF (the
/// standard's hook for a library's cleanup: it runs first thing in MPI_Finalize).
std::mutex registry_mutex;
std::set<std::shared_ptr<StoreServer::State>>& registry() {
  static auto* const servers = new std::set<std::shared_ptr<StoreServer::State>>();  // lives until exit
  return *servers;
}

/// Reply buffers of requests whose readers gave up (see run()); reachable until exit.
std::vector<std::vector<std::byte>>& abandoned_replies() {
  static auto* const replies = new std::vector<std::vector<std::byte>>();
  return *replies;
}

int stop_servers_at_finalize(MPI_Comm, int, void*, void*) {
  std::set<std::shared_ptr<StoreServer::State>> servers;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    servers.swap(registry());
  }
  for (const auto& server : servers) server->join();
  return MPI_SUCCESS;
}

void register_server(const std::shared_ptr<StoreServer::State>& state) {
  static std::once_flag hooked;
  std::call_once(hooked, [] {
    int keyval = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_servers_at_finalize, &keyval, nullptr) == MPI_SUCCESS) {
      MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
      MPI_Comm_free_keyval(&keyval);  // freed by MPI once the attribute is deleted at MPI_Finalize
    }
  });
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().insert(state);
}

void unregister_server(const std::shared_ptr<StoreServer::State>& state) noexcept {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().erase(state);
}

}  // namespace

void StoreServer::State::run() noexcept {
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> reply;
    std::uint64_t sent_fingerprint = 0;  // with kCheckReplies: of the bytes handed to MPI_Isend
  };
  std::vector<Pending> pending;
  std::vector<std::vector<std::byte>> spare;  // reply buffers to reuse
  std::vector<std::int64_t> rows;
  Backoff backoff(kServerMaxSleepUs);
  std::chrono::steady_clock::time_point stop_deadline{};
  bool stopping = false;
  try {
    for (;;) {
      bool progress = false;
      if (!stopping && stop.load()) {
        stopping = true;
        stop_deadline = std::chrono::steady_clock::now() + kStopGrace;
      }
      if (!stopping) {
        int found = 0;
        MPI_Message message = MPI_MESSAGE_NULL;
        MPI_Status status;
        STRIDER_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, kRequestTag, comm, &found, &message, &status),
                          "polling for row requests");
        if (found) {
          int count = 0;
          STRIDER_MPI_CHECK(MPI_Get_count(&status, MPI_INT64_T, &count), "");
          rows.resize(static_cast<std::size_t>(count));
          STRIDER_MPI_CHECK(MPI_Mrecv(rows.data(), count, MPI_INT64_T, &message, MPI_STATUS_IGNORE),
                            "receiving a row request");
          Pending reply;
          if (!spare.empty()) {
            reply.reply = std::move(spare.back());
            spare.pop_back();
          }
          serve(rows.data(), count, reply.reply);
          if (kCheckReplies) reply.sent_fingerprint = fingerprint(reply.reply);
          STRIDER_MPI_CHECK(MPI_Isend(reply.reply.data(), static_cast<int>(reply.reply.size()), MPI_BYTE,
                                      status.MPI_SOURCE, kReplyTag, comm, &reply.request),
                            "replying to rank " + std::to_string(status.MPI_SOURCE));
          pending.push_back(std::move(reply));
          requests.fetch_add(1, std::memory_order_relaxed);
          progress = true;
        }
      }
      for (std::size_t k = 0; k < pending.size();) {
        int done = 0;
        STRIDER_MPI_CHECK(MPI_Test(&pending[k].request, &done, MPI_STATUS_IGNORE), "sending a reply");
        if (done) {
          if (kCheckReplies && fingerprint(pending[k].reply) != pending[k].sent_fingerprint) {
            // A bug, not an input: the reply changed while MPI could still read it.
            log_error("store server: a reply buffer changed between MPI_Isend and its completion");
            std::abort();
          }
          spare.push_back(std::move(pending[k].reply));
          pending[k] = std::move(pending.back());
          pending.pop_back();
          progress = true;
        } else {
          ++k;
        }
      }
      if (stopping && (pending.empty() || std::chrono::steady_clock::now() > stop_deadline)) break;
      if (progress) {
        backoff.reset();
      } else {
        backoff.pause();
      }
    }
  } catch (const std::exception& error) {
    log_error("store server: ", error.what(), "; this rank no longer answers requests for rows");
  }
  // Replies whose readers gave up: MPI may still read their buffers, so they are never freed.
  if (!pending.empty()) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (Pending& reply : pending) {
      if (reply.request != MPI_REQUEST_NULL) MPI_Request_free(&reply.request);
      abandoned_replies().push_back(std::move(reply.reply));
    }
  }
}

StoreServer::StoreServer(MPI_Comm comm, RowServer serve) : state_(std::make_shared<State>()) {
  state_->comm = comm;
  state_->serve = std::move(serve);
  register_server(state_);
  State* state = state_.get();
  try {
    state_->thread = std::thread([state] { state->run(); });
  } catch (...) {
    unregister_server(state_);
    throw;
  }
}

StoreServer::~StoreServer() {
  stop();
}

void StoreServer::stop() noexcept {
  state_->join();
  unregister_server(state_);
}

std::int64_t StoreServer::requests() const noexcept {
  return state_->requests.load(std::memory_order_relaxed);
}

// ---- the reader's side -------------------------------------------------------------------------

void fetch_remote_rows(MPI_Comm comm, std::vector<RemoteFetch>& fetches, const std::atomic<bool>& abandon,
                       const std::function<void()>& meanwhile) {
  if (fetches.empty()) {
    meanwhile();
    return;
  }
  if (abandon.load()) STRIDER_THROW(Error, "the store stopped serving remote rows (an error on this rank)");
  std::vector<MPI_Request> receives(fetches.size(), MPI_REQUEST_NULL), sends(fetches.size(), MPI_REQUEST_NULL);
  const auto cancel_receives = [&]() noexcept {
    for (MPI_Request& request : receives) {
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  };
  try {
    // Receives first: a reply then lands directly in place, whatever the transport's protocol.
    for (std::size_t k = 0; k < fetches.size(); ++k) {
      const RemoteFetch& fetch = fetches[k];
      STRIDER_MPI_CHECK(MPI_Irecv(fetch.reply, static_cast<int>(fetch.reply_bytes), MPI_BYTE, fetch.server, kReplyTag,
                                  comm, &receives[k]),
                        "posting the receive of rows from rank " + std::to_string(fetch.server));
    }
    for (std::size_t k = 0; k < fetches.size(); ++k) {
      const RemoteFetch& fetch = fetches[k];
      STRIDER_MPI_CHECK(MPI_Isend(fetch.rows.data(), static_cast<int>(fetch.rows.size()), MPI_INT64_T, fetch.server,
                                  kRequestTag, comm, &sends[k]),
                        "asking rank " + std::to_string(fetch.server) + " for rows");
    }
    meanwhile();
  } catch (...) {
    cancel_receives();
    for (MPI_Request& request : sends)
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
    throw;
  }
  Backoff backoff(kReaderMaxSleepUs);
  int sends_done = 0, receives_done = 0;
  while (!(sends_done && receives_done)) {
    if (!sends_done)
      STRIDER_MPI_CHECK(MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sends_done, MPI_STATUSES_IGNORE),
                        "sending row requests");
    if (!receives_done)
      STRIDER_MPI_CHECK(
          MPI_Testall(static_cast<int>(receives.size()), receives.data(), &receives_done, MPI_STATUSES_IGNORE),
          "receiving rows from other nodes");
    if (sends_done && receives_done) break;
    if (abandon.load()) {
      cancel_receives();
      for (MPI_Request& request : sends)
        if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
      STRIDER_THROW(Error, "the store stopped waiting for remote rows (an error on this rank)");
    }
    backoff.pause();
  }
}

}  // namespace strider::pipeline_detail
