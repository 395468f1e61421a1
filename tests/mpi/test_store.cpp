// The in-memory store (--store memory) at 1..4 ranks, as 1, 2 or 4 ranks per node
// (STRIDER_NODE_SIZE): its batches are bit-identical to those read from the file for every sampler,
// fixed-size and sequences, contiguous, chunked and compressed, in both layouts; nothing is read
// from the file after the load; the samplers' labels and lengths are views of the node's segment;
// the budget is checked before anything is read; a rank failing
// during the load, a read error in a step, an error unwinding the stack, a changed file and a
// resumed epoch behave as without the store. Every check is agreed across ranks before it is
// asserted.
#include <fcntl.h>
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "loader_test_support.hpp"
#include "strider/comm/node_groups.hpp"

using namespace strider;
using namespace strider::testing;

namespace {

/// Whether `address` lies in a shared mapping of this process (an 's' in /proc/self/maps: the store's
/// segment, an MPI shared window) rather than in private memory (the heap).
bool in_shared_mapping(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::string line;
  while (std::getline(maps, line)) {
    std::uintptr_t begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %4s", &begin, &end, perms) == 3 && begin <= at && at < end)
      return perms[3] == 's';
  }
  return false;
}

LoaderOptions with_store(LoaderOptions options, const std::string& layout) {
  options.store.mode = "memory";
  options.store.layout = layout;
  return options;
}

/// What one rank's store loader did in the epochs it ran: bytes from the file, from other nodes.
struct Traffic {
  std::int64_t file = 0, remote = 0, local = 0, requests = 0;
  std::int64_t batches = 0;  // of the loaders that had rows of other nodes
};

/// Batch hashes of `epochs` of a store loader, and its traffic after its construction.
std::vector<std::vector<std::uint64_t>> store_hashes(const Communicator& comm, const LoaderOptions& options,
                                                     const std::vector<std::int64_t>& epochs, Traffic& traffic) {
  Loader loader(comm, options);
  std::vector<std::vector<std::uint64_t>> hashes;
  for (std::int64_t epoch : epochs) hashes.push_back(loader_hashes(loader, epoch));
  const PrefetchStats stats = loader.stats();
  traffic.file += stats.bytes_read;
  traffic.remote += stats.bytes_remote;
  traffic.local += stats.bytes_local;
  traffic.requests += stats.remote_requests;
  if (stats.bytes_remote > 0) traffic.batches += stats.batches;  // of a loader with rows on other nodes
  return hashes;
}

}  // namespace

TEST_CASE("store: node groups follow STRIDER_NODE_SIZE", "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  bool ok = true;
  for (int size : node_sizes(comm.size())) {
    const NodeSize node_size(size);
    const NodeGroups groups = NodeGroups::split(comm);
    const int per_node = size > 0 ? size : comm.size();  // one host: the real split is one node
    ok = ok && groups.nodes() == comm.size() / per_node && groups.node() == comm.rank() / per_node &&
         groups.local_rank() == comm.rank() % per_node && groups.local_size() == per_node &&
         groups.ranks_of(groups.node()).front() == comm.rank() - comm.rank() % per_node &&
         (groups.leaders_comm() != MPI_COMM_NULL) == (comm.rank() % per_node == 0);
  }
  REQUIRE(everywhere(comm, ok));
  // A size that does not divide the node's ranks, or no number, is refused on every rank.
  const NodeSize restore(0);  // the environment's value again afterwards
  for (const std::string& bad : {std::string("abc"), std::string("0"), std::to_string(comm.size() + 1)}) {
    ::setenv("STRIDER_NODE_SIZE", bad.c_str(), 1);
    const int refused = ranks_agreeing(
        comm, [&] { NodeGroups::split(comm); }, "STRIDER_NODE_SIZE");
    ::unsetenv("STRIDER_NODE_SIZE");
    REQUIRE(refused == comm.size());
  }
}

TEST_CASE("store: batches are bit-identical to the file's for every sampler, layout and node size",
          "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  // Small chunks, so that the ranks' load ranges are cut at chunk boundaries within the files.
  const FileLayout chunked{"chunked", 16, 0}, compressed{"chunked", 16, 4}, token_chunks{"chunked", 64, 4};
  const TestFile features(comm, "features", 203), features_chunked(comm, "features", 203, "_chunked", chunked),
      features_compressed(comm, "features", 203, "_deflate", compressed),
      features_wide(comm, "features", 203, "_wide", FileLayout{"contiguous", 0, 0, 16}),
      sequences(comm, "sequences", 301), sequences_compressed(comm, "sequences", 301, "_deflate", token_chunks);
  const std::vector<std::pair<const TestFile*, std::string>> files = {
      {&features, "features"},      {&features_chunked, "features"}, {&features_compressed, "features"},
      {&features_wide, "features"}, {&sequences, "sequences"},       {&sequences_compressed, "sequences"}};
  const std::vector<std::int64_t> epochs = {0, 2};
  int mismatches = 0, cases = 0;
  Traffic partitioned, replicated;
  for (const auto& [file, kind] : files) {
    for (const ModeCase& mode : every_mode()) {
      if (mode.kind != kind) continue;
      const LoaderOptions options = options_for(file->path(), mode.mode, mode.batch_size);
      std::vector<std::vector<std::uint64_t>> expected;
      for (std::int64_t epoch : epochs) expected.push_back(expected_hashes(comm, options, epoch));
      for (int size : node_sizes(comm.size())) {
        const NodeSize node_size(size);
        // Both layouts on the plain files; partition (the one with remote rows) on the others.
        for (const std::string layout : {"partition", "replicate"}) {
          // 64-byte rows: the specialised copy when a node holds every row (replicate, one node).
          if (layout == "replicate" && file != &features && file != &features_wide && file != &sequences) continue;
          ++cases;
          Traffic& traffic = layout == "partition" ? partitioned : replicated;
          if (store_hashes(comm, with_store(options, layout), epochs, traffic) != expected) {
            ++mismatches;
            UNSCOPED_INFO("mismatch: " << file->path() << " " << mode.mode << ", " << layout
                                       << ", STRIDER_NODE_SIZE=" << size);
          }
        }
      }
    }
  }
  REQUIRE_ON_ALL_RANKS(cases > 0);
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
  // Nothing came from the file after the load; rows came from other nodes only when there were
  // several nodes and the layout was partition.
  REQUIRE(comm.all_reduce(partitioned.file + replicated.file, ReduceOp::sum) == 0);
  REQUIRE(comm.all_reduce(replicated.remote, ReduceOp::sum) == 0);
  const std::int64_t remote = comm.all_reduce(partitioned.remote, ReduceOp::sum);
  REQUIRE((comm.size() > 1 ? remote > 0 : remote == 0));
  // Several batches per request (BatchReader::batches_per_read): one per owner and batch would be
  // about one per batch or more (0.96 at 2 ranks); here 0.08 at 2 ranks, 0.2 at 3 and 4.
  if (comm.size() > 1)
    REQUIRE(2 * comm.all_reduce(partitioned.requests, ReduceOp::sum) <
            comm.all_reduce(partitioned.batches, ReduceOp::sum));
  REQUIRE(comm.all_reduce(partitioned.local + replicated.local, ReduceOp::sum) > 0);
}

TEST_CASE("store: the samplers' labels and lengths are the node segment's, not a copy per rank",
          "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203), sequences(comm, "sequences", 301);
  const auto held = [&](const std::string& path) {  // every label and length, as a reader holds them
    ReaderOptions reader_options;
    reader_options.labels_in_memory = true;
    const std::unique_ptr<BatchReader> reader = open_reader(comm, path, reader_options);
    return std::make_pair(reader->labels().to_vector(), reader->lengths().to_vector());
  };
  const auto [feature_labels, no_lengths] = held(features.path());
  const auto [sequence_labels, sequence_lengths] = held(sequences.path());
  bool ok = !feature_labels.empty() && no_lengths.empty() && !sequence_lengths.empty();
  for (int size : node_sizes(comm.size())) {
    const NodeSize node_size(size);
    // Open MPI gives a node of one rank private memory for its window: nothing to share there.
    const bool shared_node = NodeGroups::split(comm).local_size() > 1;
    for (const std::string layout : {"partition", "replicate"}) {
      // Class-aware plans hold the labels; sequences hold their lengths. Both views have the file's
      // values and point into the node's segment, a shared mapping on a node of several ranks.
      Loader balanced(comm, with_store(options_for(features.path(), "balanced", 6), layout));
      const SharedView<std::int32_t> labels = balanced.labels();
      ok = ok && labels.to_vector() == feature_labels && in_shared_mapping(labels.data()) == shared_node &&
           balanced.lengths().empty();
      Loader bucketed(comm, with_store(options_for(sequences.path(), "bucketed", 0), layout));
      const SharedView<std::int64_t> lengths = bucketed.lengths();
      ok = ok && lengths.to_vector() == sequence_lengths && in_shared_mapping(lengths.data()) == shared_node &&
           bucketed.labels().empty();  // not held for a plan that does not need them
    }
  }
  // Without the store they are the reader's own, in private memory: what the check above tells apart.
  Loader file_only(comm, options_for(sequences.path(), "bucketed", 0));
  ok = ok && file_only.lengths().to_vector() == sequence_lengths && !in_shared_mapping(file_only.lengths().data());
  REQUIRE(everywhere(comm, ok));
}

TEST_CASE("store: after the load the file can change underneath: batches come from memory", "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203, "_overwritten", FileLayout{"chunked", 16, 4});
  LoaderOptions options = options_for(features.path(), "distributed", 8);
  const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 1);
  options.check_data_unchanged = false;  // the check would refuse the changed file (tested below)
  const NodeSize node_size(comm.size() % 2 == 0 ? 2 : 1);
  Loader loader(comm, with_store(options, "partition"));
  const std::int64_t loaded = comm.all_reduce(loader.store()->load_bytes_read, ReduceOp::sum);
  comm.barrier();
  if (comm.is_root()) {  // every byte of the file zeroed, same size: a read would see zeros
    struct stat status {};
    ::stat(features.path().c_str(), &status);
    std::ofstream(features.path(), std::ios::binary | std::ios::trunc)
        << std::string(static_cast<std::size_t>(status.st_size), '\0');
  }
  comm.barrier();
  const bool same = loader_hashes(loader, 1) == expected && loader_hashes(loader, 1) == expected;
  REQUIRE(everywhere(comm, same && loader.stats().bytes_read == 0));
  REQUIRE_ON_ALL_RANKS(loaded > 0);
}

TEST_CASE("store: the budget is checked on every node before anything is read", "[mpi][store][errors][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);  // 203 x 6 float32 and labels
  LoaderOptions options = with_store(options_for(features.path(), "distributed", 8), "auto");
  options.store.budget_bytes = 999;
  const int refused = ranks_agreeing(
      comm, [&] { Loader loader(comm, options); }, "but its budget is 999 bytes (--store-budget); ");
  REQUIRE(refused == comm.size());

  // 2 nodes or more: every row takes 3 pages of node memory (4872 bytes of samples, 812 of labels),
  // a node's half 2. A budget of 2.5 pages fits partition only: auto takes it, replicate is refused
  // with the advice to partition.
  if (comm.size() >= 2) {
    const NodeSize node_size(1);
    options.store.budget_bytes = 10240;
    bool auto_ok = false;
    {
      Loader loader(comm, options);
      auto_ok = loader.store()->layout == "partition" && loader.store()->node_bytes == 8192 &&
                loader_hashes(loader, 0) == expected_hashes(comm, options, 0);
    }
    REQUIRE(everywhere(comm, auto_ok));
    options.store.layout = "replicate";
    const int advised = ranks_agreeing(
        comm, [&] { Loader loader(comm, options); }, "use --store-layout partition");
    REQUIRE(advised == comm.size());
  }
}

TEST_CASE("store: a rank failing during the load ends every rank with its error", "[mpi][store][errors][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203, "_chunks", FileLayout{"chunked", 16, 0});
  const LoaderOptions options = with_store(options_for(features.path(), "distributed", 8), "partition");
  const NodeSize node_size(comm.size() % 2 == 0 ? 2 : 1);
  ::setenv("STRIDER_TEST_FAIL_LOAD", (std::to_string(comm.size() - 1) + ":0").c_str(), 1);
  const int failed = ranks_agreeing(
      comm, [&] { Loader loader(comm, options); }, "injected I/O error (STRIDER_TEST_FAIL_LOAD)");
  ::unsetenv("STRIDER_TEST_FAIL_LOAD");
  REQUIRE(failed == comm.size());
  // Nothing was left behind: the next store loads and serves.
  Loader loader(comm, options);
  REQUIRE(everywhere(comm, loader_hashes(loader, 0) == expected_hashes(comm, options, 0)));
}

TEST_CASE("store: errors in a step and while unwinding end every rank, never hang",
          "[mpi][store][errors][pipeline][abandons]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const LoaderOptions options = with_store(options_for(features.path(), "distributed", 8), "partition");
  const NodeSize node_size(1);  // every rank a node: most rows are another rank's
  // A read error in one rank's step is agreed; the Loader goes on afterwards.
  ::setenv("STRIDER_TEST_FAIL_READ", (std::to_string(comm.size() - 1) + ":2").c_str(), 1);
  Loader loader(comm, options);
  ::unsetenv("STRIDER_TEST_FAIL_READ");
  const int agreed = ranks_agreeing(
      comm,
      [&] {
        LoaderEpoch epoch = loader.epoch(0);
        while (comm.collective_try([&] { return epoch.next(); })) {
        }
      },
      "injected I/O error");
  REQUIRE(agreed == comm.size());
  // The Loader goes on: the next epoch's first steps (the hook fails step 2 of every epoch).
  bool goes_on = false;
  {
    LoaderEpoch epoch = loader.epoch(1);
    std::optional<Batch> first = epoch.next();
    goes_on = first && batch_hash(*first) == expected_hashes(comm, options, 1).front();
  }
  REQUIRE(everywhere(comm, goes_on));
  Loader other(comm, options);  // a store of its own, serving while the one below is abandoned

  // A Loader destroyed while an agreed error unwinds mid-epoch (its I/O thread fetching remote rows)
  // is left to MPI_Finalize, not closed collectively; the other store keeps serving.
  const int unwound = ranks_agreeing(
      comm,
      [&] {
        Loader doomed(comm, options);
        LoaderEpoch epoch = doomed.epoch(0);
        epoch.next();
        comm.collective_try([] { STRIDER_THROW(Error, "a step failed"); });
      },
      "a step failed");
  // A failure on one rank alone: its Loader unwinds while the other ranks wait in a barrier, so a
  // collective close of its store there would never return.
  int caught = 0;
  try {
    Loader lonely(comm, options);
    if (comm.rank() != comm.size() - 1) comm.barrier();
    throw std::runtime_error("a local failure");
  } catch (const std::runtime_error&) {
    caught = 1;
  }
  if (comm.rank() == comm.size() - 1) comm.barrier();
  REQUIRE(unwound == comm.size());
  REQUIRE(comm.all_reduce(caught, ReduceOp::sum) == comm.size());
  REQUIRE(everywhere(comm, loader_hashes(other, 2) == expected_hashes(comm, options, 2)));
}

TEST_CASE("store: a file changed after the load is refused at the next epoch", "[mpi][store][errors][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const LoaderOptions options = with_store(options_for(features.path(), "distributed", 8), "partition");
  Loader loader(comm, options);
  const bool first_ok = loader_hashes(loader, 0) == expected_hashes(comm, options, 0);
  touch_back(comm, features.path());
  const int refused = ranks_agreeing(
      comm, [&] { loader.epoch(1); }, "changed during training");
  REQUIRE(everywhere(comm, first_ok));
  REQUIRE(refused == comm.size());
}

TEST_CASE("store: resume at a mid-epoch step yields the tail of the uninterrupted epoch", "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203), sequences(comm, "sequences", 301);
  const NodeSize node_size(comm.size() % 2 == 0 ? 2 : 1);
  int mismatches = 0;
  for (const ModeCase& mode : {ModeCase{"features", "distributed", 7}, ModeCase{"sequences", "bucketed", 0}}) {
    const LoaderOptions options = with_store(options_for(mode, features, sequences), "partition");
    const std::vector<std::uint64_t> full = expected_hashes(comm, options, 1);
    const auto k = static_cast<std::int64_t>(full.size() / 2);
    const SamplerState saved = state_after_leaving(comm, options, 1, k);
    Loader resumed(comm, options);
    resumed.resume(saved);
    LoaderEpoch epoch = resumed.epoch(1);
    std::vector<std::uint64_t> tail;
    while (std::optional<Batch> batch = epoch.next()) tail.push_back(batch_hash(*batch));
    if (epoch.first_step() != k || tail != std::vector<std::uint64_t>(full.begin() + k, full.end())) {
      ++mismatches;
      UNSCOPED_INFO("store resume mismatch: " << mode.kind << " " << mode.mode);
    }
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
}

TEST_CASE("store: an owner whose ring is full still answers the other ranks", "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203);
  const NodeSize node_size(1);  // every rank a node: most rows are another rank's
  LoaderOptions options = with_store(options_for(features.path(), "distributed", 4), "partition");
  options.prefetch = 2;  // the last rank's ring is full after two batches
  const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 0);
  Loader loader(comm, options);
  std::vector<std::uint64_t> got;
  {
    // Every rank but the last reads its whole epoch while the last takes nothing: only its server
    // thread can give the others its rows. Then the last reads.
    LoaderEpoch epoch = loader.epoch(0);
    const bool last = comm.rank() == comm.size() - 1;
    if (!last)
      while (std::optional<Batch> batch = epoch.next()) got.push_back(batch_hash(*batch));
    comm.barrier();
    if (last)
      while (std::optional<Batch> batch = epoch.next()) got.push_back(batch_hash(*batch));
  }
  REQUIRE(everywhere(comm, got == expected));
}

TEST_CASE("store: elastic resume at one rank keeps the global batches of R ranks", "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 204, "_elastic");  // 1..4 ranks: no padding
  constexpr std::int64_t global_batch = 12;                    // divisible by 1, 2, 3 and 4 ranks
  const NodeSize node_size(1);                                 // every rank a node: remote rows
  const LoaderOptions options =
      with_store(options_for(features.path(), "distributed", global_batch / comm.size()), "partition");
  Loader loader(comm, options);
  LoaderEpoch epoch = loader.epoch(0);
  const std::int64_t steps = epoch.end_step(), k = steps / 2;
  std::vector<std::uint64_t> global;  // per step from k: the fingerprint of the union of the ranks' batches
  SamplerState saved;
  while (std::optional<Batch> batch = epoch.next()) {
    if (batch->step() == k) saved = loader.state_after(k);
    if (batch->step() >= k) global.push_back(comm.all_reduce(index_fingerprint(batch->indices()), ReduceOp::sum));
  }
  int ok = 1;
  if (comm.is_root()) {  // one rank with a store of its own, batch R*B, resumed from the R-rank state
    const Communicator alone = Communicator::duplicate(MPI_COMM_SELF);
    LoaderOptions single = options;
    single.sampler.batch_size = global_batch;
    single.store.mode = "none";
    const std::vector<std::uint64_t> from_file = [&] {  // the same resumed plan read from the file
      Loader file_loader(alone, single);
      file_loader.resume(saved);
      return loader_hashes(file_loader, 0);
    }();
    single.store.mode = "memory";
    Loader resumed(alone, single);
    resumed.resume(saved);
    std::vector<std::uint64_t> tail, hashes;
    for (Batch batch : resumed.epoch(0)) {
      tail.push_back(index_fingerprint(batch.indices()));
      hashes.push_back(batch_hash(batch));
    }
    ok = tail == global && static_cast<std::int64_t>(global.size()) == steps - k && hashes == from_file ? 1 : 0;
  }
  REQUIRE(comm.all_reduce(1 - ok, ReduceOp::sum) == 0);
}

TEST_CASE("store: --lookahead fetches a window's remote rows with one request per owner node",
          "[mpi][store][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203), sequences(comm, "sequences", 301);
  const NodeSize node_size(1);  // every rank a node: most rows are another node's
  constexpr std::int64_t window = 4;
  int mismatches = 0;
  bool counts_ok = true;
  for (const ModeCase& mode : {ModeCase{"features", "distributed", 7}, ModeCase{"sequences", "bucketed", 0}}) {
    LoaderOptions options = with_store(options_for(mode, features, sequences), "partition");
    const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 1);
    options.lookahead = window;
    Loader loader(comm, options);
    if (loader_hashes(loader, 1) != expected) {
      ++mismatches;
      UNSCOPED_INFO("store lookahead mismatch: " << mode.kind << " " << mode.mode);
    }
    // At most one request per other node per window of steps (and some, with several nodes).
    const auto windows = static_cast<std::int64_t>((expected.size() + window - 1) / window);
    const std::int64_t requests = loader.stats().remote_requests;
    counts_ok = counts_ok && requests <= windows * (comm.size() - 1) && (comm.size() == 1) == (requests == 0);
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
  REQUIRE(everywhere(comm, counts_ok));
}
