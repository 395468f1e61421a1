#pragma once
/// \file
/// The library's own MPI communicator: a duplicate of the caller's, with MPI_ERRORS_RETURN so that
/// every MPI error becomes an MpiError, and with the node-local rank that picks a GPU.

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "strider/comm/mpi_check.hpp"
#include "strider/core/error.hpp"
#include "strider/core/unique_handle.hpp"

namespace strider {

namespace detail {
struct MpiCommTraits {
  using handle_type = MPI_Comm;
  static MPI_Comm null() noexcept { return MPI_COMM_NULL; }
  static void release(MPI_Comm comm) noexcept;
};

template <typename T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, char>)
    return MPI_CHAR;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return MPI_UINT8_T;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else
    static_assert(sizeof(T) == 0, "no MPI datatype for this type");
}
}  // namespace detail

/// Reduction operations for Communicator::all_reduce.
enum class ReduceOp { sum, min, max };

/// A move-only MPI communicator owned by strider. Not thread-safe: one thread uses it at a time.
class Communicator {
 public:
  /// Collective over parent: every rank of parent must call. Duplicates parent (MPI_Comm_dup), sets
  /// MPI_ERRORS_RETURN on the duplicate, and finds the node-local rank and size
  /// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED).
  static Communicator duplicate(MPI_Comm parent = MPI_COMM_WORLD);

  Communicator(Communicator&&) noexcept = default;
  Communicator& operator=(Communicator&&) noexcept = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Rank among the ranks of this communicator on the same node (0..local_size-1).
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return local_size_; }
  bool is_root() const noexcept { return rank_ == 0; }
  /// The native handle, for calls strider does not wrap (still owned by this object).
  MPI_Comm native() const noexcept { return comm_.get(); }

  /// Collective: every rank must call.
  void barrier() const;

  /// Collective: a barrier at the entry of a collective API call (`what`: "Loader::epoch").
  /// A rank that has waited longer than STRIDER_COLLECTIVE_WARN_S seconds (default 60) for the
  /// others logs one warning naming `what`, then waits on: a Loader built or an epoch started on
  /// some ranks only would otherwise hang without a word. Returns whether it warned.
  bool arrive_together(const std::string& what) const;

  /// Collective: every rank must call with the same count. Broadcasts count values from root.
  template <typename T>
  void broadcast(T* values, std::int64_t count, int root = 0) const {
    broadcast_bytes(values, count * static_cast<std::int64_t>(sizeof(T)), root);
  }
  /// Collective: resizes value on the other ranks to root's length and broadcasts it.
  void broadcast(std::string& value, int root = 0) const;
  /// Collective: resizes values on the other ranks to root's size and broadcasts them.
  template <typename T>
  void broadcast(std::vector<T>& values, int root = 0) const {
    static_assert(std::is_trivially_copyable_v<T>);
    std::int64_t count = static_cast<std::int64_t>(values.size());
    broadcast(&count, 1, root);
    values.resize(static_cast<std::size_t>(count));
    broadcast(values.data(), count, root);
  }

  /// Collective: element-wise reduction of count values in place, result on every rank.
  template <typename T>
  void all_reduce(T* values, std::int64_t count, ReduceOp op) const {
    all_reduce_typed(values, count, detail::mpi_type<T>(), op);
  }
  /// Collective: reduction of one value, result on every rank.
  template <typename T>
  T all_reduce(T value, ReduceOp op) const {
    all_reduce(&value, 1, op);
    return value;
  }

  /// Collective: gathers one value from every rank on every rank (index = rank).
  template <typename T>
  std::vector<T> all_gather(const T& value) const {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> values(static_cast<std::size_t>(size_));
    all_gather_bytes(&value, values.data(), static_cast<std::int64_t>(sizeof(T)));
    return values;
  }

  /// Collective: every rank names the same settings in the same order (`named`: name, value as
  /// text). Throws UsageError on every rank when any rank's value of any setting differs from rank
  /// 0's, naming the lowest such rank's first one: "<name> is <value> on rank R but <value> on rank
  /// 0: <advice>". For options that must match across ranks (a batch size that differs would give
  /// ranks different step counts, and their collectives would hang or mismatch).
  void require_same_values(const std::vector<std::pair<std::string, std::string>>& named,
                           const std::string& advice) const;

  /// Collective: agrees on failure. Each rank passes its own failure (or nullptr). If no rank
  /// failed, returns. Otherwise every rank throws the same AgreedError carrying the message of the
  /// lowest failing rank (its what(), with that rank's context), so no rank is left blocked in the
  /// next collective.
  void agree(std::exception_ptr local_failure) const;

  /// Collective: runs body() on every rank, then agree()s on whether it threw anywhere. Returns
  /// body()'s result on success. Use it around any phase that may fail on some ranks only (opening
  /// and validating a file, parsing options, a step) before the next collective.
  template <typename Body>
  auto collective_try(Body&& body) const -> decltype(body()) {
    std::exception_ptr failure;
    if constexpr (std::is_void_v<decltype(body())>) {
      try {
        body();
      } catch (...) {
        failure = std::current_exception();
      }
      agree(failure);
    } else {
      std::decay_t<decltype(body())> result{};
      try {
        result = body();
      } catch (...) {
        failure = std::current_exception();
      }
      agree(failure);
      return result;
    }
  }

 private:
  Communicator() = default;
  void broadcast_bytes(void* data, std::int64_t bytes, int root) const;
  void all_reduce_typed(void* values, std::int64_t count, MPI_Datatype type, ReduceOp op) const;
  void all_gather_bytes(const void* send, void* receive, std::int64_t bytes_per_rank) const;

  UniqueHandle<detail::MpiCommTraits> comm_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

/// Communicator::arrive_together on any communicator (one strider has not duplicated yet, e.g. the
/// caller's before Communicator::duplicate, whose MPI_Comm_dup would wait without a word).
bool arrive_together(MPI_Comm comm, const std::string& what);

}  // namespace strider
