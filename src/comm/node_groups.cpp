#include "strider/comm/node_groups.hpp"

#include <algorithm>
#include <cstdlib>

namespace strider {

namespace {

/// Makes a communicator of the library's own check its calls (MPI_ERRORS_RETURN, STYLE.md 3).
UniqueHandle<detail::MpiCommTraits> owned(MPI_Comm comm) {
  UniqueHandle<detail::MpiCommTraits> handle(comm);
  if (comm != MPI_COMM_NULL) STRIDER_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "");
  return handle;
}

}  // namespace

int parse_node_size(const char* text) {
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 1 << 20)
    STRIDER_THROW(UsageError, std::string("STRIDER_NODE_SIZE must be an integer >= 1, got '") + text + "'");
  return static_cast<int>(value);
}

NodeGroups NodeGroups::split(const Communicator& comm) {
  NodeGroups groups;
  MPI_Comm real_node = MPI_COMM_NULL;
  STRIDER_MPI_CHECK(MPI_Comm_split_type(comm.native(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &real_node),
                    "finding the ranks on this node");
  const UniqueHandle<detail::MpiCommTraits> real_node_owner = owned(real_node);
  int real_rank = 0, real_size = 1;
  STRIDER_MPI_CHECK(MPI_Comm_rank(real_node, &real_rank), "");
  STRIDER_MPI_CHECK(MPI_Comm_size(real_node, &real_size), "");
  comm.collective_try([&] {
    groups.forced_size_ = parse_node_size(std::getenv("STRIDER_NODE_SIZE"));
    if (groups.forced_size_ > 0 && real_size % groups.forced_size_ != 0)
      STRIDER_THROW(UsageError, "STRIDER_NODE_SIZE=" + std::to_string(groups.forced_size_) + " does not divide the " +
                                    std::to_string(real_size) + " ranks of a node");
  });
  const int group = groups.forced_size_ > 0 ? real_rank / groups.forced_size_ : 0;
  MPI_Comm node = MPI_COMM_NULL;
  STRIDER_MPI_CHECK(MPI_Comm_split(real_node, group, real_rank, &node), "grouping the ranks of a node");
  groups.node_comm_ = owned(node);
  STRIDER_MPI_CHECK(MPI_Comm_rank(node, &groups.local_rank_), "");

  // A node is named by its lowest rank (its local rank 0: the splits keep rank order).
  int leader = comm.rank();
  STRIDER_MPI_CHECK(MPI_Bcast(&leader, 1, MPI_INT, 0, node), "finding the node's first rank");
  const std::vector<int> leader_of_rank = comm.all_gather(leader);
  std::vector<int> leaders = leader_of_rank;
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  groups.ranks_of_node_.resize(leaders.size());
  groups.node_of_rank_.resize(leader_of_rank.size());
  for (std::size_t rank = 0; rank < leader_of_rank.size(); ++rank) {
    const int index =
        static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader_of_rank[rank]) - leaders.begin());
    groups.node_of_rank_[rank] = index;
    groups.ranks_of_node_[static_cast<std::size_t>(index)].push_back(static_cast<int>(rank));
  }
  groups.node_ = groups.node_of_rank_[static_cast<std::size_t>(comm.rank())];

  MPI_Comm leaders_comm = MPI_COMM_NULL;
  STRIDER_MPI_CHECK(
      MPI_Comm_split(comm.native(), groups.local_rank_ == 0 ? 0 : MPI_UNDEFINED, groups.node_, &leaders_comm),
      "joining the nodes' first ranks");
  groups.leaders_comm_ = owned(leaders_comm);
  return groups;
}

std::string NodeGroups::describe() const {
  std::size_t smallest = ranks_of_node_.front().size(), largest = smallest;
  for (const std::vector<int>& ranks : ranks_of_node_) {
    smallest = std::min(smallest, ranks.size());
    largest = std::max(largest, ranks.size());
  }
  std::string text =
      std::to_string(nodes()) + (nodes() == 1 ? " node of " : " nodes of ") +
      (smallest == largest ? std::to_string(smallest) : std::to_string(smallest) + " to " + std::to_string(largest)) +
      (largest == 1 ? " rank" : " ranks");
  if (forced_size_ > 0) text += " (STRIDER_NODE_SIZE=" + std::to_string(forced_size_) + ")";
  return text;
}

}  // namespace strider
