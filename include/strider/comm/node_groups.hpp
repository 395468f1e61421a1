#pragma once
/// \file
/// The ranks of a communicator grouped by node: the ranks that share memory
/// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), or, for testing on one machine, consecutive
/// groups of STRIDER_NODE_SIZE ranks within each node, so that 4 ranks on one host behave as 2
/// nodes of 2. The setting never changes GPU binding (that uses Communicator::local_rank).

#include <mpi.h>

#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"

namespace strider {

/// The node each rank of a communicator belongs to, and a communicator per node. Move-only (it owns
/// MPI communicators).
class NodeGroups {
 public:
  /// Collective over comm: every rank must call. Splits comm by node; with the environment variable
  /// STRIDER_NODE_SIZE=k (k >= 1, dividing every real node's rank count) each real node's ranks,
  /// in rank order, form groups of k. Nodes are numbered in the order of their lowest rank. Throws
  /// AgreedError on every rank for a bad STRIDER_NODE_SIZE.
  static NodeGroups split(const Communicator& comm);

  NodeGroups(NodeGroups&&) noexcept = default;
  NodeGroups& operator=(NodeGroups&&) noexcept = default;
  NodeGroups(const NodeGroups&) = delete;
  NodeGroups& operator=(const NodeGroups&) = delete;

  /// This rank's node, 0..nodes()-1.
  int node() const noexcept { return node_; }
  int nodes() const noexcept { return static_cast<int>(ranks_of_node_.size()); }
  /// This rank within its node (0..local_size()-1, in comm rank order).
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return static_cast<int>(ranks_of_node_[node_].size()); }
  /// The node of comm rank `rank`.
  int node_of(int rank) const { return node_of_rank_.at(static_cast<std::size_t>(rank)); }
  /// The comm ranks of `node`, in local order.
  const std::vector<int>& ranks_of(int node) const { return ranks_of_node_.at(static_cast<std::size_t>(node)); }
  /// The ranks of this node (MPI_ERRORS_RETURN set; owned by this object).
  MPI_Comm node_comm() const noexcept { return node_comm_.get(); }
  /// Local rank 0 of every node, in node order (rank = node); MPI_COMM_NULL on the other ranks.
  MPI_Comm leaders_comm() const noexcept { return leaders_comm_.get(); }
  /// How the groups were formed, for logs: "2 nodes of 2 ranks (STRIDER_NODE_SIZE=2)".
  std::string describe() const;

 private:
  NodeGroups() = default;
  UniqueHandle<detail::MpiCommTraits> node_comm_, leaders_comm_;
  int node_ = 0;
  int local_rank_ = 0;
  int forced_size_ = 0;  // STRIDER_NODE_SIZE, or 0
  std::vector<int> node_of_rank_;
  std::vector<std::vector<int>> ranks_of_node_;
};

/// Parses a STRIDER_NODE_SIZE value: 0 for none (null or empty), else an integer >= 1. Throws
/// UsageError naming the variable otherwise. Pure.
int parse_node_size(const char* text);

}  // namespace strider
