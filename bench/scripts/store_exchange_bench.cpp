// store_exchange_bench: rows of another node, one-sided MPI_Get against the store's request and
// reply, measured side by side.
//
// R ranks run as nodes of --node-size consecutive ranks (as STRIDER_NODE_SIZE does for the store).
// Every rank holds --rows rows of --row-bytes bytes; every rank then fetches batches of --batch
// random rows, all of them held by the next node, and checks every byte it got:
//   rma:     a window over every rank (MPI_Win_allocate), MPI_Win_lock_all once; per batch the rows
//            sorted, one MPI_Get per run of adjacent rows of one owner, MPI_Win_flush_all, then the
//            rows put in batch order (one copy);
//   request: the store's own code (pipeline_detail::StoreServer and fetch_remote_rows on a
//            duplicated communicator, MPI_THREAD_MULTIPLE): one request naming the rows to the rank
//            of the owner node with the same local rank, whose server thread copies them out of
//            the node's shared segment (MPI_Win_allocate_shared) into one reply, which lands in
//            place.
// Prints one JSON object per mode: us per batch (mean over ranks), rows/s and GB/s (summed over
// ranks), gets per batch (rma), and the one-sided component Open MPI chose (from the window's
// info where it says, else OMPI_MCA_osc).
//
//   mpicxx -O2 -std=c++17 -Iinclude -Ibuild/include -Isrc bench/scripts/store_exchange_bench.cpp \
//       -Lbuild/lib -lstrider -Wl,-rpath,$PWD/build/lib -o store_exchange_bench
//   mpirun -np 4 store_exchange_bench --row-bytes 256 --batch 256 [--rows N] [--seconds S]
//       [--node-size 2] [--mode rma|request|both]

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "pipeline/store_exchange.hpp"

namespace {

using strider::pipeline_detail::fetch_remote_rows;
using strider::pipeline_detail::RemoteFetch;
using strider::pipeline_detail::StoreServer;

struct Options {
  std::int64_t rows = 0, row_bytes = 256, batch = 256;
  int node_size = 2;
  double seconds = 2.0;
  std::string mode = "both";
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "store_exchange_bench: %s\nusage: store_exchange_bench --row-bytes D --batch B [--rows N] "
               "[--seconds S] [--node-size K] [--mode rma|request|both]\n",
               problem.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (i + 1 >= argc) usage("no value after " + name);
    const char* value = argv[++i];
    if (name == "--rows")
      options.rows = std::atoll(value);
    else if (name == "--row-bytes")
      options.row_bytes = std::atoll(value);
    else if (name == "--batch")
      options.batch = std::atoll(value);
    else if (name == "--node-size")
      options.node_size = std::atoi(value);
    else if (name == "--seconds")
      options.seconds = std::atof(value);
    else if (name == "--mode")
      options.mode = value;
    else
      usage("unknown option " + name);
  }
  // Default: 64 MiB per rank, at least 4 batches' worth of rows.
  if (options.rows <= 0) options.rows = std::max<std::int64_t>(4 * options.batch, (64 << 20) / options.row_bytes);
  if (options.row_bytes <= 0 || options.batch <= 0 || options.node_size <= 0) usage("sizes must be positive");
  return options;
}

/// The byte `offset` of global row `row`: what every rank writes and every reader checks.
std::byte pattern(std::int64_t row, std::int64_t offset) {
  return static_cast<std::byte>((row * 131 + offset * 7 + (offset >> 8)) & 0xff);
}

void fill(std::byte* rows, std::int64_t first_row, std::int64_t count, std::int64_t row_bytes) {
  for (std::int64_t r = 0; r < count; ++r)
    for (std::int64_t b = 0; b < row_bytes; ++b) rows[r * row_bytes + b] = pattern(first_row + r, b);
}

bool check(const std::byte* batch, const std::vector<std::int64_t>& rows, std::int64_t row_bytes) {
  for (std::size_t k = 0; k < rows.size(); ++k)
    for (std::int64_t b = 0; b < row_bytes; b += 61)  // a sample of every row's bytes, first and last
      if (batch[k * row_bytes + b] != pattern(rows[k], b) ||
          batch[k * row_bytes + row_bytes - 1] != pattern(rows[k], row_bytes - 1))
        return false;
  return true;
}

struct Layout {
  int rank = 0, ranks = 0, node_size = 0, nodes = 0, node = 0, local_rank = 0;
  std::int64_t rows_per_rank = 0;
  int target_node() const { return (node + 1) % nodes; }
  /// A batch of random rows, all held by the target node.
  void draw(std::mt19937_64& random, std::int64_t batch, std::vector<std::int64_t>& rows) const {
    const std::int64_t node_rows = rows_per_rank * node_size;
    std::uniform_int_distribution<std::int64_t> pick(0, node_rows - 1);
    rows.resize(static_cast<std::size_t>(batch));
    for (auto& row : rows) row = static_cast<std::int64_t>(target_node()) * node_rows + pick(random);
  }
};

struct Result {
  double seconds = 0;
  std::int64_t batches = 0, gets = 0;
  bool correct = true;
};

/// Runs `one_batch` until every rank has run for `seconds` (the ranks agree on the count after a
/// trial), after 4 untimed batches.
template <typename Batch>
Result timed(const Options& options, Batch&& one_batch) {
  Result result;
  for (int k = 0; k < 4; ++k) result.correct &= one_batch(result);
  MPI_Barrier(MPI_COMM_WORLD);
  // Trial: how many batches fit in a tenth of the time, agreed as the minimum over ranks.
  double start = MPI_Wtime();
  std::int64_t trial = 0;
  while (MPI_Wtime() - start < options.seconds / 10) {
    result.correct &= one_batch(result);
    ++trial;
  }
  std::int64_t count = std::max<std::int64_t>(1, trial * 9);
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  result.gets = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  start = MPI_Wtime();
  for (std::int64_t k = 0; k < count; ++k) result.correct &= one_batch(result);
  result.seconds = MPI_Wtime() - start;
  result.batches = count;
  return result;
}

std::string osc_component(MPI_Win window) {
  MPI_Info info = MPI_INFO_NULL;
  std::string found;
  if (MPI_Win_get_info(window, &info) == MPI_SUCCESS && info != MPI_INFO_NULL) {
    int keys = 0;
    MPI_Info_get_nkeys(info, &keys);
    for (int k = 0; k < keys; ++k) {
      char key[MPI_MAX_INFO_KEY + 1] = {};
      MPI_Info_get_nthkey(info, k, key);
      char value[256] = {};
      int length = 0, flag = 0;
      MPI_Info_get_valuelen(info, key, &length, &flag);
      MPI_Info_get(info, key, static_cast<int>(sizeof value) - 1, value, &flag);
      if (!found.empty()) found += ", ";
      found += std::string(key) + "=" + value;
    }
    MPI_Info_free(&info);
  }
  const char* forced = std::getenv("OMPI_MCA_osc");
  return std::string("OMPI_MCA_osc=") + (forced ? forced : "(default)") + "; window info: " + found;
}

Result run_rma(const Options& options, const Layout& layout, std::string& component) {
  const std::int64_t bytes = layout.rows_per_rank * options.row_bytes;
  std::byte* base = nullptr;
  MPI_Win window = MPI_WIN_NULL;
  MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &window);
  fill(base, static_cast<std::int64_t>(layout.rank) * layout.rows_per_rank, layout.rows_per_rank, options.row_bytes);
  component = osc_component(window);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, window);
  std::mt19937_64 random(1000 + layout.rank);
  std::vector<std::int64_t> rows, order(static_cast<std::size_t>(options.batch));
  std::vector<std::byte> sorted(static_cast<std::size_t>(options.batch * options.row_bytes)), batch(sorted.size());
  auto one_batch = [&](Result& result) {
    layout.draw(random, options.batch, rows);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return rows[a] < rows[b]; });
    // One MPI_Get per run of adjacent rows of one owner, into the sorted buffer.
    for (std::size_t k = 0; k < order.size();) {
      const std::int64_t first = rows[order[k]];
      const int owner = static_cast<int>(first / layout.rows_per_rank);
      std::size_t end = k + 1;
      while (end < order.size() && rows[order[end]] == rows[order[end - 1]] + 1 &&
             rows[order[end]] / layout.rows_per_rank == owner)
        ++end;
      // Duplicates: the same row again is a run of its own (a real plan has none within a batch).
      const auto run = static_cast<std::int64_t>(end - k);
      MPI_Get(sorted.data() + static_cast<std::int64_t>(k) * options.row_bytes,
              static_cast<int>(run * options.row_bytes), MPI_BYTE, owner,
              (first - static_cast<std::int64_t>(owner) * layout.rows_per_rank) * options.row_bytes,
              static_cast<int>(run * options.row_bytes), MPI_BYTE, window);
      ++result.gets;
      k = end;
    }
    MPI_Win_flush_all(window);
    for (std::size_t k = 0; k < order.size(); ++k)
      std::memcpy(batch.data() + order[k] * options.row_bytes, sorted.data() + k * options.row_bytes,
                  static_cast<std::size_t>(options.row_bytes));
    return check(batch.data(), rows, options.row_bytes);
  };
  Result result = timed(options, one_batch);
  MPI_Win_unlock_all(window);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&window);
  return result;
}

Result run_request(const Options& options, const Layout& layout, MPI_Comm node_comm) {
  // The node's rows in one shared segment, as the store holds them.
  const std::int64_t bytes = layout.rows_per_rank * options.row_bytes;
  std::byte* mine = nullptr;
  MPI_Win segment = MPI_WIN_NULL;
  MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node_comm, &mine, &segment);
  fill(mine, static_cast<std::int64_t>(layout.rank) * layout.rows_per_rank, layout.rows_per_rank, options.row_bytes);
  MPI_Aint size = 0;
  int unit = 0;
  std::byte* node_base = nullptr;
  MPI_Win_shared_query(segment, 0, &size, &unit, &node_base);  // contiguous: rank 0's part first
  const std::int64_t node_first_row = static_cast<std::int64_t>(layout.node) * layout.node_size * layout.rows_per_rank;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Barrier(node_comm);
  Result result;
  {
    const std::int64_t row_bytes = options.row_bytes;
    StoreServer server(comm, [&](const std::int64_t* rows, std::int64_t count, std::vector<std::byte>& out) {
      out.resize(static_cast<std::size_t>(count * row_bytes));
      for (std::int64_t k = 0; k < count; ++k)
        std::memcpy(out.data() + k * row_bytes, node_base + (rows[k] - node_first_row) * row_bytes,
                    static_cast<std::size_t>(row_bytes));
    });
    MPI_Barrier(MPI_COMM_WORLD);
    std::mt19937_64 random(1000 + layout.rank);
    std::vector<std::byte> batch(static_cast<std::size_t>(options.batch * options.row_bytes));
    std::vector<RemoteFetch> fetches(1);
    const std::atomic<bool> abandon{false};
    const int server_rank = layout.target_node() * layout.node_size + layout.local_rank;
    auto one_batch = [&](Result& counts) {
      RemoteFetch& fetch = fetches[0];
      layout.draw(random, options.batch, fetch.rows);
      fetch.server = server_rank;
      fetch.reply = batch.data();
      fetch.reply_bytes = options.batch * options.row_bytes;
      fetch_remote_rows(comm, fetches, abandon, [] {});
      ++counts.gets;
      return check(batch.data(), fetch.rows, options.row_bytes);
    };
    result = timed(options, one_batch);
    MPI_Barrier(MPI_COMM_WORLD);  // every rank done asking before any server stops
    server.stop();
  }
  MPI_Comm_free(&comm);
  MPI_Win_free(&segment);
  return result;
}

void report(const char* mode, const Options& options, const Layout& layout, const Result& result,
            const std::string& component) {
  double us = result.seconds / static_cast<double>(result.batches) * 1e6;
  double rows_per_s = static_cast<double>(result.batches * options.batch) / result.seconds;
  double gets = static_cast<double>(result.gets) / static_cast<double>(result.batches);
  int correct = result.correct ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &rows_per_s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &gets, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (layout.rank != 0) return;
  us /= layout.ranks;
  gets /= layout.ranks;
  std::printf(
      "{\"mode\": \"%s\", \"ranks\": %d, \"node_size\": %d, \"row_bytes\": %lld, \"batch\": %lld, "
      "\"us_per_batch\": %.1f, \"rows_per_s\": %.0f, \"gb_per_s\": %.3f, \"messages_per_batch\": %.1f, "
      "\"correct\": %s, \"batches\": %lld, \"osc\": \"%s\"}\n",
      mode, layout.ranks, layout.node_size, static_cast<long long>(options.row_bytes),
      static_cast<long long>(options.batch), us, rows_per_s, rows_per_s * static_cast<double>(options.row_bytes) / 1e9,
      gets, correct ? "true" : "false", static_cast<long long>(result.batches), component.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Options options = parse(argc, argv);
  Layout layout;
  MPI_Comm_rank(MPI_COMM_WORLD, &layout.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &layout.ranks);
  if (provided < MPI_THREAD_MULTIPLE) usage("MPI_THREAD_MULTIPLE is not provided");
  if (layout.ranks % options.node_size != 0 || layout.ranks / options.node_size < 2)
    usage("the ranks must make at least 2 nodes of --node-size");
  layout.node_size = options.node_size;
  layout.nodes = layout.ranks / options.node_size;
  layout.node = layout.rank / options.node_size;
  layout.local_rank = layout.rank % options.node_size;
  layout.rows_per_rank = options.rows;
  MPI_Comm node_comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, layout.node, layout.rank, &node_comm);
  if (options.mode == "rma" || options.mode == "both") {
    std::string component;
    const Result result = run_rma(options, layout, component);
    report("rma", options, layout, result, component);
  }
  if (options.mode == "request" || options.mode == "both") {
    const Result result = run_request(options, layout, node_comm);
    report("request", options, layout, result, "");
  }
  MPI_Comm_free(&node_comm);
  MPI_Finalize();
  return 0;
}
